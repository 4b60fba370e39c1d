"""model fetch: a model's files to persistent disk, resumable after a SIGKILL or an instance stop.

Each file goes through index/download.py (a `.part` file, HTTP Range resume from its size, the hub's sha256
where it publishes one, a rename when complete), so a rerun continues where the last stopped. A file whose
sha256 does not match is fetched once more from its first byte, then refused.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from ascend_setup.errors import AscendSetupError
from ascend_setup.fit.model_files import SMALL_FILES
from ascend_setup.hub.base import Listing, RemoteFile
from ascend_setup.index import download as _download
from ascend_setup.index.download import download
from ascend_setup.utils.inputs import path_inside
from ascend_setup.utils.paths import default_workdir

Progress = Callable[[RemoteFile, int], None]
#: Kept free beyond the model's bytes (logs, the venv's caches).
DISK_MARGIN = 1024**3
#: Where fetched models go by default: the persistent disk of the cloud instances this tool was made on.
MODELS_ROOT = Path("/mnt/workspace/models")


def default_dest(model_id: str) -> Path:
    """/mnt/workspace/models/<id> (the persistent disk), else models/<id> beside the default workdir."""
    if MODELS_ROOT.parent.is_dir() and os.access(MODELS_ROOT.parent, os.W_OK):
        return MODELS_ROOT / model_id
    return default_workdir().parent / "models" / model_id


def selected(listing: Listing, include: Optional[Sequence[str]]) -> List[RemoteFile]:
    """The files to fetch: all of them, or those matching --include (plus fit's small files)."""
    files = [f for f in listing.files if not (f.path.startswith("/") or ".." in Path(f.path).parts)]
    if not include:
        return files
    return [f for f in files if f.path in SMALL_FILES or any(fnmatch.fnmatch(f.path, g) for g in include)]


def remaining_bytes(files: Sequence[RemoteFile], dest: Path) -> int:
    """What is still to download: a complete file counts nothing, a .part only its missing tail."""
    total = 0
    for f in files:
        target = path_inside(
            dest,
            f.path,
            "the hub's listing of the model's files",
            hint="the hub (or the endpoint answering for it) lists a path outside the model",
        )
        part = target.with_name(target.name + ".part")
        if target.is_file() and target.stat().st_size == f.size:
            continue
        total += max(0, f.size - (part.stat().st_size if part.is_file() else 0))
    return total


def check_disk(files: Sequence[RemoteFile], dest: Path) -> int:
    """Refuse before the first byte when the disk cannot hold what is left (plus a margin)."""
    need = remaining_bytes(files, dest)
    probe = dest
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need + DISK_MARGIN > free:
        raise AscendSetupError(
            f"{dest}: {need / 1024**3:.2f} GiB still to download (+ {DISK_MARGIN / 1024**3:g} "
            f"GiB margin), {free / 1024**3:.2f} GiB free on that disk",
            hint="free space, or choose another disk with --to DIR",
        )
    return need


def _bytes_of(f: RemoteFile, on_progress: Progress) -> _download.Progress:
    """The download's progress callback for the file `f` (its total is f.size, known already)."""
    return lambda done, _total: on_progress(f, done)


def fetch_files(
    files: Sequence[RemoteFile],
    dest: Path,
    url_of: Callable[[str], str],
    *,
    on_progress: Optional[Progress] = None,
    on_retry: Optional[Callable[[str, str], None]] = None,
) -> None:
    for f in files:
        target = path_inside(
            dest,
            f.path,
            "the hub's listing of the model's files",
            hint="the hub (or the endpoint answering for it) lists a path outside the model",
        )
        if target.is_file() and target.stat().st_size != f.size:
            target.unlink()  # ours, from an earlier fetch into this directory, and not the hub's file
        for attempt in (1, 2):
            try:
                download(
                    [url_of(f.path)],
                    target,
                    sha256=f.sha256,
                    size=f.size,
                    on_progress=_bytes_of(f, on_progress) if on_progress else None,
                )
                break
            except AscendSetupError as exc:
                if attempt == 2 or "sha256" not in exc.message:
                    raise
                if on_retry:
                    on_retry(f.path, exc.message)
        if target.stat().st_size != f.size:
            raise AscendSetupError(f"{f.path}: {target.stat().st_size} bytes on disk, the hub lists {f.size}")
