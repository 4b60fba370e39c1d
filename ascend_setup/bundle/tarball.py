"""A bundle tar, read as data. Every member is checked before anything is unpacked: a regular file or a
folder (a bundle holds no link, device or FIFO), a relative name that stays inside the folder it is unpacked
into, each name once (a second `manifest.json` would be the one unpacked, not the one checked). A member is
read into memory only up to its kind's size (a 4 MB tar.gz can hold a 1 GiB manifest of spaces)."""

from __future__ import annotations

import os
import tarfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import KINDS, check_relative_path

HINT = "the bundle is damaged or not an ascend-setup bundle: make it again with 'ascend-setup bundle'"


@contextmanager
def open_tar(tar: Path, what: str) -> Iterator[tarfile.TarFile]:
    """The tar, read (compressed or not); one that is cut short or corrupt is bad input naming `what`."""
    try:
        with tarfile.open(tar) as archive:
            yield archive
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise BadInput(f"{what} is not a readable tar file ({exc.__class__.__name__}: {exc})", hint=HINT) from None


def _refusal(member: tarfile.TarInfo) -> Optional[str]:
    """Why `member` may not be unpacked, or None."""
    try:
        check_relative_path(member.name)
    except ValueError as exc:
        return str(exc)
    if member.issym() or member.islnk():
        return f"is a {'symbolic' if member.issym() else 'hard'} link (to {ascii(member.linkname)[:120]})"
    if not (member.isfile() or member.isdir()):
        return "is a device, FIFO or other special file"
    return None


def checked_members(archive: tarfile.TarFile, what: str) -> List[tarfile.TarInfo]:
    """Every member of `archive`, once each is known to be safe to unpack; else BadInput naming the first
    that is not."""
    members, names = [], set()
    for member in archive:
        why = _refusal(member)
        if why is None and member.name in names:
            why = "appears twice"
        if why is not None:
            raise BadInput(f"{what}: member {ascii(member.name)[:120]} {why}", hint=HINT)
        names.add(member.name)
        members.append(member)
    return members


def check_tar_members(tar: Path, what: str) -> None:
    """Every member of the tar at `tar` checked (see checked_members), nothing unpacked."""
    with open_tar(tar, what) as archive:
        checked_members(archive, what)


def read_member(tar: Path, name: str, kind: str, what: str) -> Optional[bytes]:
    """The member `name` (the first of that name: the tar is read only as far as it), up to its kind's size
    (utils/inputs.KINDS); None when the tar has none."""
    label, limit = KINDS[kind]
    with open_tar(tar, what) as archive:
        for member in archive:
            if member.name != name:
                continue
            where = f"{what}:{name}"
            if not member.isfile():
                raise BadInput(f"{where} is not a regular file in the tar", hint=HINT)
            if limit is not None and member.size > limit:
                raise BadInput(f"{where} is {member.size} bytes, more than the {limit} a {label} may have", hint=HINT)
            handle = archive.extractfile(member)
            assert handle is not None  # a regular file's handle, which reads member.size bytes at most
            return handle.read()
    return None


def extract(tar: Path, into: Path, what: str) -> None:
    """Every member of the tar unpacked into `into`, once all are checked. Where Python has tarfile's `data`
    filter (3.8.17, 3.9.17, 3.10.12, 3.11.4, 3.12 and later) it applies too; before that, the same rules by
    hand: no set-id bits, nothing writable by others, files owned by whoever unpacks."""
    with open_tar(tar, what) as archive:
        members = checked_members(archive, what)
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, members=members, filter="data")
            return
        for m in members:
            m.mode = (m.mode | (0o700 if m.isdir() else 0o600)) & 0o755
            m.uid, m.gid, m.uname, m.gname = os.geteuid(), os.getegid(), "", ""
        archive.extractall(into, members=members)
