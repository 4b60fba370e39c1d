"""Signals to the tool's pid: every process it started stops before it exits (and so before the run
lock is free), the exit code says which signal, and the next run resumes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import clean_env
from helpers.processes import processes_mentioning as _processes_mentioning
from helpers.stack import status

from ascend_setup.simulate.index_server import BlackHole


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_builds_pip_cleanly_and_the_rerun_resumes(source_stack, tmp_path: Path, sig) -> None:
    """The moment is vllm-ascend's source build: pip (`pip wheel`, whichever installer the run uses) and the
    build backend under it, the longest-lived children of an install."""
    workdir = tmp_path / "wd"
    proc = source_stack.spawn(workdir, "--installer", "pip")
    log = workdir / "logs" / "vllm-ascend.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "Building CXX object" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.05)
    assert proc.poll() is None, "the install ended before its build could be interrupted"
    assert [p for p in _processes_mentioning(str(workdir)) if p != proc.pid], "no pip child to stop"
    start = time.monotonic()
    os.kill(proc.pid, sig)  # the tool's pid only, as `kill` or a supervisor would
    proc.wait(timeout=30)
    took = time.monotonic() - start
    assert proc.returncode == 128 + sig and took < 2, (proc.returncode, took)
    assert _processes_mentioning(str(workdir)) == []  # no orphaned pip or build backend
    with open(workdir / "run.lock") as handle:  # free: nothing holds it any more
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    err = proc.stderr_path.read_text()
    assert f"interrupted by {signal.Signals(sig).name}" in err and "run the same command again to resume" in err
    states = {s["name"]: s["state"] for s in status(source_stack, workdir)["steps"]}
    assert states["vllm-ascend"] == "interrupted" and states["plugin-deps"] == "done"
    rerun = source_stack.install(workdir, "--installer", "pip")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "vllm-ascend: " in rerun.stderr and "interrupted last time" in rerun.stderr


def test_ctrl_c_in_mirrors_takes_effect_at_once(tmp_path: Path) -> None:
    hole = BlackHole()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ascend_setup",
                "mirrors",
                "--cann",
                "9.1.0",
                "--only",
                "--candidate",
                hole.url,
                "--budget",
                "60",
                "--workdir",
                str(tmp_path / "wd"),
            ],
            env=clean_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)  # well into the wait for a mirror that never answers
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        hole.close()
    assert proc.returncode == 130 and took < 1.0, (proc.returncode, took, err)
    assert "interrupted by SIGINT" in err and "resume" not in err
    assert not (tmp_path / "wd" / "mirrors.json").exists() or json.loads((tmp_path / "wd" / "mirrors.json").read_text())


def test_a_copied_workdir_resumes_in_the_copy_never_in_its_original(source_stack, tmp_path: Path) -> None:
    import shutil

    from helpers.stack import kill_group

    original = tmp_path / "wd"
    proc = source_stack.spawn(original)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (original / "logs" / "torch-stack.log").exists() and proc.poll() is None:
        time.sleep(0.05)
    kill_group(proc)
    before = sorted(str(p.relative_to(original)) for p in original.rglob("*"))
    state_before = (original / "state.json").read_text()
    moved = tmp_path / "wd_moved"
    shutil.copytree(original, moved, symlinks=True)
    resumed = source_stack.cli("resume", "--workdir", str(moved))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted(str(p.relative_to(original)) for p in original.rglob("*")) == before
    assert (original / "state.json").read_text() == state_before  # the original is untouched
    options = json.loads((moved / "state.json").read_text())["options"]
    assert options["workdir"] == str(moved) and options["venv"] == str(moved / "venv")
    assert (moved / "venv" / "ascend-setup.json").is_file()
