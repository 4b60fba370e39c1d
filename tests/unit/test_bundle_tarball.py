"""A bundle tar's unpacking, with tarfile's `data` filter and with the rules by hand that stand in for it on a
Python without one (3.8.16 and older): the same members refused, the same modes and owner on what is
unpacked. The filterless path is taken by hiding `tarfile.data_filter`, as an older Python lacks it."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from ascend_setup.bundle.tarball import extract
from ascend_setup.errors import BadInput


def _tar(path: Path, *members: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w") as archive:
        for m in members:
            archive.addfile(m, io.BytesIO(b"x" * m.size) if m.isfile() else None)
    return path


def _file(name: str, mode: int = 0o644, size: int = 1) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uid, info.gid, info.uname = size, mode, 4242, 4242, "someone"
    return info


def _special(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.fixture(params=["data-filter", "by-hand"])
def filtering(request, monkeypatch) -> str:
    if request.param == "by-hand":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no data filter")
    return request.param


def test_modes_and_owner_are_tamed(tmp_path: Path, filtering: str) -> None:
    tar = _tar(tmp_path / "b.tar", _file("tool/run", 0o6777), _file("files/a.whl", 0o666))
    into = tmp_path / "into"
    into.mkdir()
    extract(tar, into, "--bundle b.tar")
    run, wheel = (into / "tool" / "run").stat(), (into / "files" / "a.whl").stat()
    assert stat.S_IMODE(run.st_mode) & 0o7022 == 0 and stat.S_IMODE(wheel.st_mode) & 0o022 == 0
    assert run.st_uid == os.geteuid() and wheel.st_uid == os.geteuid()


@pytest.mark.parametrize(
    "member, words",
    [
        (_file("../outside.txt"), "is not a relative path"),
        (_file("/etc/cron.d/job"), "is not a relative path"),
        (_special("files/evil", tarfile.SYMTYPE, "/etc/passwd"), "is a symbolic link"),
        (_special("files/evil", tarfile.LNKTYPE, "../outside.txt"), "is a hard link"),
        (_special("files/fifo", tarfile.FIFOTYPE), "is a device, FIFO"),
        (_special("files/dev", tarfile.CHRTYPE), "is a device, FIFO"),
    ],
    ids=["climbs", "absolute", "symlink", "hardlink", "fifo", "device"],
)
def test_a_member_that_could_land_or_point_outside_unpacks_nothing(
    tmp_path: Path, filtering: str, member, words: str
) -> None:
    tar = _tar(tmp_path / "b.tar", _file("files/ok.whl"), member)
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(BadInput, match=words):
        extract(tar, into, "--bundle b.tar")
    assert list(into.iterdir()) == []  # checked whole before the first member is written
