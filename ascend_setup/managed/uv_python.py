"""Fetching a pinned CPython build and having uv unpack it into the workdir.

The tool downloads the archive itself (a `.part` resumed with HTTP Range after a stop, fail-over between
the mirrors that have the file, its sha256 checked) and hands uv a one-entry downloads list naming that
file, with `--offline`: uv then only unpacks it and fixes up its build-time paths (sysconfig), which is what
uv does and a tar.extractall would not. A stopped uv leaves its temp folder, never a half-moved install;
a kill after the move but before the fix-ups is repaired with --reinstall."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional

from ascend_setup.dists.installers import uv_command
from ascend_setup.errors import AscendSetupError
from ascend_setup.host.interpreters import Interpreter, probe
from ascend_setup.index.download import download, sha256_of
from ascend_setup.index.trust import decide_trust
from ascend_setup.knowledge.scan import triage
from ascend_setup.managed.pinned import PythonBuild, PythonBuilds, uv_downloads_json
from ascend_setup.managed.sources import Probe, probe_all
from ascend_setup.utils.files import atomic_write_text, make_dir, open_append, refuse_link
from ascend_setup.utils.procs import run_logged
from ascend_setup.utils.redact import redact_url

Progress = Callable[[int, Optional[int]], None]
#: The most a CPython build's archive may be when no mirror said its size (install_only_stripped builds are
#: 20-40 MB; the debug ones under 200 MB): a mirror that streams on is cut here, not at the disk's end.
MAX_ARCHIVE = 512 * 1024 * 1024


def archive_path(downloads: Path, build: PythonBuild) -> Path:
    return downloads / "python" / build.file


def fetch_archive(
    builds: PythonBuilds,
    which: PythonBuild,
    downloads: Path,
    log: Path,
    *,
    mirror: Optional[str] = None,
    offline_copy: Optional[Path] = None,
    on_progress: Optional[Progress] = None,
) -> Path:
    """The build's archive on disk, checked by its pinned sha256: already there, copied from a bundle
    (`offline_copy`, no network), or downloaded from the first mirror that has the exact file."""
    dest = archive_path(downloads, which)
    if offline_copy is not None:
        return _copy_checked(offline_copy, dest, which.sha256)
    if dest.exists() and sha256_of(dest) == which.sha256:
        return dest
    probes = probe_all([which.url(prefix) for prefix in builds.prefixes(mirror)])
    _log_probes(log, probes)
    usable = [p for p in probes if p.ok]
    if not usable:
        raise AscendSetupError(
            f"no mirror has {which.file}: "
            + "; ".join(f"{redact_url(p.url).split('/')[2]}: {p.problem}" for p in probes),
            hint="pass --python-mirror URL (a copy laid out as URL/<build>/<file>), or --python /path/to/python3.X, "
            "or install from a bundle (ascend-setup bundle carries the interpreter)",
        )
    return download(
        [p.url for p in usable],
        dest,
        sha256=which.sha256,
        size=usable[0].size,
        most=MAX_ARCHIVE,
        on_progress=on_progress,
        on_failover=lambda url, why: _log(log, f"mirror {url} failed ({why}); trying the next"),
    )


def _copy_checked(source: Path, dest: Path, sha256: str) -> Path:
    """A bundle's archive, checked as a download is: copied to a `.part`, its sha256 compared, renamed."""
    if dest.exists() and sha256_of(dest) == sha256:
        return dest
    make_dir(dest.parent)
    part = dest.with_name(dest.name + ".part")
    refuse_link(part)
    shutil.copyfile(source, part)
    if sha256_of(part) != sha256:
        part.unlink()
        raise AscendSetupError(
            f"{source} does not match the pinned sha256 of {dest.name}", hint="the bundle is damaged: copy it again"
        )
    os.replace(part, dest)
    return dest


def _log(log: Path, line: str) -> None:
    with open_append(log) as handle:
        handle.write(line + "\n")


def _log_probes(log: Path, probes: List[Probe]) -> None:
    with open_append(log) as handle:
        for p in probes:
            handle.write(f"mirror {p.url}: {'has it' if p.ok else p.problem}\n")


def uv_python_env(
    install_dir: Path, cache: Path, network: Mapping[str, str], base: Optional[Mapping[str, str]] = None
) -> Dict[str, str]:
    """uv with none of the user's uv settings or config, installing into `install_dir` only (no links in
    ~/.local/bin), trusting what the run trusts."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("UV_")}
    env.update(
        {
            "UV_NO_CONFIG": "1",
            "UV_PYTHON_INSTALL_DIR": str(install_dir),
            "UV_PYTHON_INSTALL_BIN": "0",
            "UV_PYTHON_INSTALL_REGISTRY": "0",
            "UV_CACHE_DIR": str(cache),
            "UV_PYTHON_DOWNLOADS": "manual",
        }
    )
    env.update(decide_trust(network).uv_env(uv_command()))
    return env


def install_build(
    which: PythonBuild,
    archive: Path,
    install_dir: Path,
    cache: Path,
    log: Path,
    *,
    network: Mapping[str, str],
    reinstall: bool = False,
) -> Interpreter:
    """uv unpacks `archive` into `install_dir`; the interpreter it leaves, checked to run and make venvs."""
    listing = archive.parent / f"{which.key}.downloads.json"
    atomic_write_text(listing, json.dumps(uv_downloads_json(which, archive), indent=1) + "\n")
    make_dir(install_dir)
    env = uv_python_env(install_dir, cache, network)
    env["UV_PYTHON_DOWNLOADS_JSON_URL"] = str(listing)
    argv = [*uv_command(), "python", "install", which.version, "--offline", *(["--reinstall"] if reinstall else [])]
    run_logged(argv, log, env=env, what="uv python install", explain=triage, writes=install_dir)
    python = which.python_in(install_dir)
    interp = probe(str(python))
    if interp is None or interp.version != which.version or not interp.has_venv:
        got = (
            "does not run" if interp is None else f"is {interp.version}" + ("" if interp.has_venv else " without venv")
        )
        raise AscendSetupError(
            f"the managed Python {python} {got} after uv unpacked {archive.name}",
            hint="run again (it reinstalls); if it persists, pass --python /path/to/python3.X",
        )
    return interp
