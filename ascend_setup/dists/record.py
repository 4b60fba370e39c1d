"""Is an installed distribution whole? Every file its RECORD lists is there, at the recorded size.

pip and uv are not atomic: a SIGKILL mid-install can leave a dist-info whose files are missing, or
files of two versions in one package (a half-replaced pip that cannot import itself). Reading the
metadata alone calls that done; this module reads RECORD.

Cost: one `lstat` per file. Content is hashed only for files of at most HASH_LIMIT bytes (here, in
`_problem`): those are the Python sources and metadata where a two-version mix can keep a size, and
reading them is cheap; a 1 GB torch library is judged by its size alone, or the check would cost as
much as the install. Entries without a size (the `.pyc` files pip lists, RECORD itself) are skipped.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, List, Optional

from packaging.utils import canonicalize_name

from ascend_setup.dists.installed import VenvContents
from ascend_setup.utils.files import read_regular_text

HASH_LIMIT = 256 * 1024


@dataclass(frozen=True)
class Damage:
    """What is wrong with one installed distribution (the first few problems, and how many in all)."""

    name: str
    dist_info: Path
    problems: List[str]
    record_readable: bool = True

    def summary(self) -> str:
        more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        return f"{self.name}: {self.problems[0]}{more}"


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _problem(site: Path, entry: str, hashed: str, size: str) -> Optional[str]:
    if not size.isdigit():
        return None  # no size recorded: .pyc files, RECORD itself
    path = Path(os.path.normpath(site / entry))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"{entry} is missing"
    except OSError as exc:
        return f"{entry}: {exc.strerror}"
    if st.st_size != int(size):
        return f"{entry} has {st.st_size} bytes, RECORD says {size}"
    if hashed.startswith("sha256=") and st.st_size <= HASH_LIMIT:
        try:
            if _digest(path) != hashed[len("sha256=") :]:
                return f"{entry} differs from its RECORD sha256"
        except OSError as exc:
            return f"{entry}: {exc.strerror}"
    return None


def drop_bytecode(dist_info: Path) -> int:
    """Remove the `.pyc` caches beside the files a distribution's RECORD lists; returns how many.

    A full disk lets Python's bytecode writer make a short write and still rename the file into place (its
    write is one unchecked `write()`): the next import fails with `EOFError: marshal data too short`, in pip
    itself when pip wrote its own caches while the disk filled. A `.pyc` records no size, so it cannot be
    checked like the rest; it is a cache Python rebuilds, so an interrupted step drops it instead."""
    try:
        rows = list(csv.reader(read_regular_text(dist_info / "RECORD").splitlines()))
    except (OSError, UnicodeDecodeError, ValueError, csv.Error):
        return 0
    site = dist_info.parent
    dirs = {Path(os.path.normpath(site / row[0])).parent for row in rows if row and row[0].endswith(".py")}
    removed = 0
    for directory in dirs:
        cache = directory / "__pycache__"
        if cache.is_dir() and not cache.is_symlink():
            for pyc in cache.glob("*.pyc"):
                if pyc.is_file() and not pyc.is_symlink():
                    pyc.unlink()
                    removed += 1
    return removed


def folder_project(dist_info: Path) -> str:
    """The project a `name-version.dist-info` folder is of, by its name alone, as installers read it (uv
    counts a folder with no METADATA as installed by this name)."""
    return canonicalize_name(dist_info.name.rsplit(".", 1)[0].split("-", 1)[0])


def nameless_damage(dist_info: Path) -> Damage:
    """A dist-info whose METADATA a stop left missing or unreadable: to be removed before a reinstall."""
    return Damage(
        folder_project(dist_info), dist_info, ["its METADATA is missing or unreadable"], record_readable=False
    )


def damage_in(contents: VenvContents, wanted: Collection[str]) -> List[Damage]:
    """The distributions of `wanted` in a venv that a stop left half-written: files that do not match their
    RECORD, an unreadable RECORD, or a dist-info with no readable METADATA (which the reader cannot name)."""
    found = (check_dist(d.name, d.path) for d in contents.dists if d.name in wanted)
    nameless = (nameless_damage(meta) for meta in contents.nameless)
    return [d for d in found if d is not None] + [d for d in nameless if d.name in wanted]


def check_dist(name: str, dist_info: Path) -> Optional[Damage]:
    """None when every file with a recorded size is there and matches; else what is wrong."""
    try:
        text = read_regular_text(dist_info / "RECORD")
    except (OSError, UnicodeDecodeError, ValueError):
        return Damage(name, dist_info, ["its RECORD is missing or unreadable"], record_readable=False)
    site = dist_info.parent
    problems = []
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error:
        return Damage(name, dist_info, ["its RECORD is not a CSV file"], record_readable=False)
    for row in rows:
        if not row or not row[0]:
            continue
        found = _problem(site, row[0], row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
        if found:
            problems.append(found)
    return Damage(name, dist_info, problems) if problems else None
