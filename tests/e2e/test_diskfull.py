"""A full disk is a clear stop, and the next run after space is freed converges: on a real tmpfs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers.stack import installed, lock_versions

from ascend_setup.engine.workdir import Workdir
from ascend_setup.index.download import download
from ascend_setup.simulate.index_server import LocalIndex
from ascend_setup.steps.install_session import install_store
from ascend_setup.utils.diskfull import DiskFull

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland


class Tmpfs(type(Path())):  # type: ignore[misc]
    def resize(self, size: str) -> None:
        """Free space as a user would (the files stay)."""
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self)], check=True, capture_output=True)


@pytest.fixture
def tmpfs(tmp_path: Path):
    """A real small tmpfs (we are root in CI)."""
    mount = Tmpfs(tmp_path / "small")
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount rights): {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _error_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines() if line.startswith("ascend-setup: error:")]


def test_download_stops_with_one_line_and_resumes_after_space_is_freed(tmpfs: Path, tmp_path: Path) -> None:
    data = hashlib.sha256(b"seed").digest() * (3 * 1024 * 1024 // 32)  # 3 MB, on a 1 MB filesystem
    (tmp_path / "big-1.0.tar.gz").write_bytes(data)
    index = LocalIndex()
    try:
        index.add(tmp_path / "big-1.0.tar.gz")
        url = f"{index.base}/files/big-1.0.tar.gz"
        dest = tmpfs / "big-1.0.tar.gz"
        sha = hashlib.sha256(data).hexdigest()
        with pytest.raises(DiskFull) as caught:
            download([url], dest, sha256=sha, size=len(data))
        line = caught.value.one_line()
        assert (
            f"disk full: {tmpfs} (tmpfs) has " in line
            and f" free; downloading big-1.0.tar.gz could not write {dest}.part" in line
        ), line
        kept = (tmpfs / "big-1.0.tar.gz.part").stat().st_size
        assert kept > 0 and data.startswith((tmpfs / "big-1.0.tar.gz.part").read_bytes())
        tmpfs.resize("8m")
        index.requests.clear()
        assert download([url], dest, sha256=sha, size=len(data)) == dest
        assert dest.read_bytes() == data
        assert index.requests[0][1].get("Range") == f"bytes={kept}-"  # it went on from the last byte written
    finally:
        index.close()


def _used(mount: Path) -> int:
    st = os.statvfs(mount)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def test_install_on_a_full_disk_stops_clearly_then_converges(wheel_stack, tmpfs: Path) -> None:
    """Preflight wants the row's 40 GiB free, so the tmpfs starts that large (a tmpfs size is a limit, not
    memory); once preflight is done it shrinks to what is used plus 8 MB: the disk fills mid-pipeline."""
    tmpfs.resize("41g")
    workdir = tmpfs / "w"
    proc = wheel_stack.spawn(workdir, "--installer", "pip")
    store = install_store(Workdir(workdir))
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        steps = store.load().steps if (workdir / "state.json").exists() else {}
        if "preflight" in steps and steps["preflight"].state == "done":
            break
        time.sleep(0.01)
    for _ in range(50):  # it grows while we measure: a size below the usage is refused, so try again
        try:
            tmpfs.resize(str(_used(tmpfs) + 8 * 1024 * 1024))
            break
        except subprocess.CalledProcessError:
            continue
    else:
        raise AssertionError("could not shrink the tmpfs")
    proc.wait(timeout=600)
    stderr = proc.stderr_path.read_text()
    assert proc.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr
    (line,) = _error_lines(stderr)
    assert f"disk full: {tmpfs} (tmpfs) has " in line and " free; " in line and "could not write" in line, line
    state = store.load()  # parses: never half-written
    stopped = [n for n, r in state.steps.items() if r.state != "done"]
    tmpfs.resize("41g")
    again = wheel_stack.install(workdir, "--installer", "pip")
    assert again.returncode == 0, again.stderr[-3000:]
    assert installed(workdir / "venv") == lock_versions(workdir)
    print(f"disk full at {stopped}: {line}")
