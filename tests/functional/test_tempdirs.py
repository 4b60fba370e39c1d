"""A SIGKILLed run's temp root (pip's half-unpacked wheels in it) is removed by the next run, and nothing else is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers.cli import REPO

HOLD = """
import sys, time
from ascend_setup.utils import tempdirs
import pytest

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland
print(tempdirs.enter(), flush=True)
time.sleep(float(sys.argv[1]))
"""


def _start(tmp: Path, seconds: float) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", HOLD, str(seconds)], stdout=subprocess.PIPE, text=True, env=env)


def _enter_once(tmp: Path) -> None:
    enter_and_leave = "from ascend_setup.utils import tempdirs; tempdirs.enter(); tempdirs.leave()"
    subprocess.run(
        [sys.executable, "-c", enter_and_leave],
        env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)},
        check=True,
    )


def test_the_next_run_removes_a_killed_runs_root_and_nothing_else(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    killed = _start(tmp, 60)
    killed_root = Path(killed.stdout.readline().strip())
    (killed_root / "pip-unpack-x").mkdir()
    (killed_root / "pip-unpack-x" / "torch.whl").write_bytes(b"\0" * 4096)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    alive = _start(tmp, 60)
    alive_root = Path(alive.stdout.readline().strip())
    foreign = tmp / "ascend-setup-run-not-ours"  # the prefix, but no owner file: someone else's
    foreign.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("user data")
    link = tmp / "ascend-setup-run-link"
    link.symlink_to(outside, target_is_directory=True)
    reused = tmp / "ascend-setup-run-reused"  # a live pid, but another process's start time: a reused pid
    reused.mkdir()
    (reused / ".ascend-setup-owner").write_text(f"{os.getpid()} 1\n")
    try:
        _enter_once(tmp)
        assert not killed_root.exists() and not reused.exists()
        assert alive_root.is_dir() and foreign.is_dir() and link.is_symlink()
        assert (outside / "keep").read_text() == "user data"
    finally:
        alive.kill()
        alive.wait()
