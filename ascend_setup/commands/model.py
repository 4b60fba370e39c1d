"""`ascend-setup model fetch MODEL_ID`: fit first (headers only), then the download, resumable."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Literal, Optional, Sequence, Type

from pydantic import BaseModel, ConfigDict

from ascend_setup.cli import flags
from ascend_setup.cli.command import Result
from ascend_setup.cli.fit_options import FitFlagOptions, HubOptions
from ascend_setup.cli.render import Output, stderr_console
from ascend_setup.errors import EXIT_OK, AscendSetupError, BadInput
from ascend_setup.utils.files import open_append
from ascend_setup.utils.paths import check_dir_path

if TYPE_CHECKING:  # imported when a terminal shows the bar
    from rich.console import Console
    from rich.progress import Progress

    from ascend_setup.hub.base import RemoteFile


class ModelFetchOptions(FitFlagOptions, HubOptions):
    model_command: Literal["fetch"] = "fetch"
    model: str
    to: Optional[str] = None
    include: Optional[List[str]] = None
    force: bool = False
    resume_on_login: Optional[bool] = None
    on_login: bool = False


class FetchedDocument(BaseModel):
    """`model fetch --json`: what was fetched, from which hub and commit, to where, and fit's headline."""

    model_config = ConfigDict(extra="forbid")

    model: str
    source: str
    commit: str
    dir: str
    files: int
    bytes: int
    fit: str


DOCUMENTS: Dict[str, Type[BaseModel]] = {"model fetch": FetchedDocument}


def _argv(options: ModelFetchOptions, dest: Path) -> List[str]:
    """This fetch's own arguments, to run again at the next login."""
    argv = ["model", "fetch", options.model, "--to", str(dest)]
    for flag in ("source", "revision", "endpoint", "card", "hbm_gib", "bandwidth", "tp"):
        value = getattr(options, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    for glob in options.include or []:
        argv += ["--include", glob]
    return argv + (["--force"] if options.force else []) + (["--resume-on-login"] if options.resume_on_login else [])


def _continue_in_background(options: ModelFetchOptions, dest: Path) -> Result:
    from ascend_setup.engine import login

    log = dest / ".ascend-setup-fetch.log"
    dest.mkdir(parents=True, exist_ok=True)
    with open_append(log) as handle:
        subprocess.Popen(
            ["nohup", sys.executable, "-m", "ascend_setup", *_argv(options, dest)],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, login.GUARD: "1"},
        )
    stderr_console().print(
        f"model fetch of {options.model} was interrupted; continuing in the background (log: {log})",
        markup=False,
        soft_wrap=True,
    )
    return Result(EXIT_OK)


def run_fetch(options: ModelFetchOptions, output: Output) -> Result:
    from ascend_setup.engine import login
    from ascend_setup.fit.fit_request import card_of_flags, check_endpoint, fit_model
    from ascend_setup.hub.base import check_model_id
    from ascend_setup.hub.fetch import check_disk, default_dest, fetch_files, selected
    from ascend_setup.hub.remote import client, remote_files
    from ascend_setup.index.pipconfig import trust_for_this_run
    from ascend_setup.utils.paths import cache_dir

    check_model_id(options.model)
    dest = Path(options.to).expanduser().absolute() if options.to else default_dest(options.model)
    check_dir_path(dest, "--to")
    if options.on_login:
        return _continue_in_background(options, dest)
    card = card_of_flags(options)
    check_endpoint(options)
    trust_for_this_run()
    files, listing = remote_files(
        options.model,
        source=options.source,
        revision=options.revision,
        endpoint_url=options.endpoint,
        cache=cache_dir(),
        refresh=options.refresh,
    )
    fit = fit_model(options, files, card)
    if fit.blockers and not options.force:
        raise AscendSetupError(
            f"{options.model} refused before downloading: {fit.blockers[0]}",
            hint="'ascend-setup fit' shows the figures; --force downloads it anyway",
        )
    wanted = selected(listing, options.include)
    if not wanted:
        raise BadInput(f"--include {' '.join(options.include or [])} matches no file of {options.model}")
    need = check_disk(wanted, dest)
    if options.resume_on_login:
        login.install_block(dest, argv=[*_argv(options, dest), "--on-login"])
    hub = client(listing.source, options.endpoint)
    err = stderr_console()
    total = sum(f.size for f in wanted)
    err.print(
        f"{options.model} ({listing.source}, commit {listing.commit[:12]}): {len(wanted)} files, "
        f"{total / 1024**3:.2f} GiB, {need / 1024**3:.2f} GiB still to fetch -> {dest}",
        markup=False,
        soft_wrap=True,
    )
    with _progress(err, total, dest, wanted) as on_progress:
        fetch_files(
            wanted,
            dest,
            lambda path: hub.url(listing, path),
            on_progress=on_progress,
            on_retry=lambda path, why: err.print(f"{path}: {why}; fetching it again", markup=False, soft_wrap=True),
        )
    if options.resume_on_login is not None:
        login.remove_block(dest)
    document = FetchedDocument(
        model=options.model,
        source=listing.source,
        commit=listing.commit,
        dir=str(dest),
        files=len(wanted),
        bytes=total,
        fit=fit.headline,
    )
    fetched = f"fetched {options.model} to {dest}: {len(wanted)} files, sha256 checked where the hub publishes it"
    return Result(EXIT_OK, document, lambda _: err.print(fetched, markup=False, soft_wrap=True))


class _progress:
    """A rich progress bar (bytes, rate, ETA) in a terminal; a line per finished file otherwise."""

    def __init__(self, console: Console, total: int, dest: Path, files: Sequence[RemoteFile]) -> None:
        self.console, self.total, self.dest = console, total, dest
        self.base: Dict[str, int] = {f.path: 0 for f in files}
        self.bar: Optional[Progress] = None
        self.last = time.monotonic()

    def __enter__(self) -> Callable[[RemoteFile, int], None]:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        if self.console.is_terminal:
            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.bar.start()
            self.task = self.bar.add_task("fetch", total=self.total)

        def on_progress(f: RemoteFile, done: int) -> None:
            self.base[f.path] = done
            if self.bar is not None:
                self.bar.update(self.task, completed=sum(self.base.values()), description=Path(f.path).name[:30])
            elif done >= f.size or time.monotonic() - self.last > 10:
                self.last = time.monotonic()
                self.console.print(
                    f"{f.path}: {done / 2**20:.1f} of {f.size / 2**20:.1f} MiB; all files "
                    f"{sum(self.base.values()) / 2**30:.2f} of {self.total / 2**30:.2f} GiB",
                    markup=False,
                    soft_wrap=True,
                )

        return on_progress

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def model_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="model_command", metavar="fetch")
    sub.required = True
    f = sub.add_parser(
        "fetch",
        help="download MODEL_ID (after fit says it fits), resumable after a stop, each file "
        "checked against the hub's sha256",
    )
    flags.common(f)
    f.add_argument("model", metavar="MODEL_ID", help="a hub id, e.g. Qwen/Qwen3-8B")
    f.add_argument(
        "--to", metavar="DIR", help="where (default /mnt/workspace/models/<id>, else models/<id> beside the workdir)"
    )
    f.add_argument(
        "--include",
        metavar="GLOB",
        action="append",
        help="only files matching GLOB (repeatable; the fit's small files are always fetched)",
    )
    f.add_argument("--force", action="store_true", help="download even when fit refuses (does not fit, or a blocker)")
    flags.fit_flags(f)
    flags.resume_on_login(f, "if stopped, continue at the next login (a guarded block in ~/.bashrc, removed when done)")
    f.add_argument("--on-login", action="store_true", help=argparse.SUPPRESS)
    flags.hub(f)
    f.set_defaults(func=run_fetch, options=ModelFetchOptions)


ARGUMENTS = {"model": model_arguments}
