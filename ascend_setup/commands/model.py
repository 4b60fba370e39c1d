"""`ascend-setup model fetch MODEL_ID`: fit first (headers only), then the download, resumable."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, stderr_console
from ascend_setup.engine import login
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.utils.files import open_append
from ascend_setup.utils.paths import check_dir_path, default_workdir

if TYPE_CHECKING:  # imported when a terminal shows the bar
    from rich.console import Console
    from rich.progress import Progress

    from ascend_setup.hub.base import RemoteFile

MODELS_ROOT = Path("/mnt/workspace/models")


def default_dest(model_id: str) -> Path:
    """/mnt/workspace/models/<id> (the persistent disk), else models/<id> beside the default workdir."""
    if MODELS_ROOT.parent.is_dir() and os.access(MODELS_ROOT.parent, os.W_OK):
        return MODELS_ROOT / model_id
    return default_workdir().parent / "models" / model_id


def _argv(args: argparse.Namespace, dest: Path) -> List[str]:
    """This fetch's own arguments, to run again at the next login."""
    argv = ["model", "fetch", args.model, "--to", str(dest)]
    for flag in ("source", "revision", "endpoint", "card", "hbm_gib", "bandwidth", "tp"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    for glob in args.include or []:
        argv += ["--include", glob]
    return argv + (["--force"] if args.force else []) + (["--resume-on-login"] if args.resume_on_login else [])


def _continue_in_background(args: argparse.Namespace, dest: Path) -> int:
    log = dest / ".ascend-setup-fetch.log"
    dest.mkdir(parents=True, exist_ok=True)
    with open_append(log) as handle:
        subprocess.Popen(
            ["nohup", sys.executable, "-m", "ascend_setup", *_argv(args, dest)],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, login.GUARD: "1"},
        )
    stderr_console().print(
        f"model fetch of {args.model} was interrupted; continuing in the background (log: {log})",
        markup=False,
        soft_wrap=True,
    )
    return 0


def run_fetch(args: argparse.Namespace, output: Output) -> int:
    from ascend_setup.commands.fit import check_flags, fit_model
    from ascend_setup.hub.base import check_model_id
    from ascend_setup.hub.fetch import check_disk, fetch_files, selected
    from ascend_setup.hub.remote import client, remote_files
    from ascend_setup.index.pipconfig import trust_for_this_run
    from ascend_setup.utils.paths import cache_dir

    check_model_id(args.model)
    dest = Path(args.to).expanduser().absolute() if args.to else default_dest(args.model)
    check_dir_path(dest, "--to")
    if args.on_login:
        return _continue_in_background(args, dest)
    card = check_flags(args)
    if args.endpoint and not args.source:
        raise BadInput("--endpoint needs --source modelscope or --source huggingface (it is one hub's address)")
    trust_for_this_run()
    files, listing = remote_files(
        args.model,
        source=args.source,
        revision=args.revision,
        endpoint_url=args.endpoint,
        cache=cache_dir(),
        refresh=args.refresh,
    )
    fit = fit_model(args, files, card)
    if fit.blockers and not args.force:
        raise AscendSetupError(
            f"{args.model} refused before downloading: {fit.blockers[0]}",
            hint="'ascend-setup fit' shows the figures; --force downloads it anyway",
        )
    wanted = selected(listing, args.include)
    if not wanted:
        raise BadInput(f"--include {' '.join(args.include or [])} matches no file of {args.model}")
    need = check_disk(wanted, dest)
    if args.resume_on_login:
        login.install_block(dest, argv=[*_argv(args, dest), "--on-login"])
    hub = client(listing.source, args.endpoint)
    err = stderr_console()
    total = sum(f.size for f in wanted)
    err.print(
        f"{args.model} ({listing.source}, commit {listing.commit[:12]}): {len(wanted)} files, "
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
    if args.resume_on_login is not None:
        login.remove_block(dest)
    result = {
        "model": args.model,
        "source": listing.source,
        "commit": listing.commit,
        "dir": str(dest),
        "files": len(wanted),
        "bytes": total,
        "fit": fit.headline,
    }
    if args.json:
        output.print_json(result)
    else:
        err.print(
            f"fetched {args.model} to {dest}: {len(wanted)} files, sha256 checked where the hub publishes it",
            markup=False,
            soft_wrap=True,
        )
    return 0


class _progress:
    """A rich progress bar (bytes, rate, ETA) in a terminal; a line per finished file otherwise."""

    def __init__(self, console: Console, total: int, dest: Path, files: Sequence[RemoteFile]) -> None:
        self.console, self.total, self.dest = console, total, dest
        self.base = {f.path: 0 for f in files}
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
    f.set_defaults(func=run_fetch)


ARGUMENTS = {"model": model_arguments}
