"""Subprocess output reaches the step log as it arrives, so a SIGKILL of the tool keeps it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.cli import REPO

PARENT = """
import sys
from pathlib import Path
from ascend_setup.utils.procs import run_logged
# the strings are built at run time: the log's own `$ argv` line must not contain them
child = ("import time; print('collecting', 'torch-npu', flush=True); print('downloading', 40, flush=True); "
         "time.sleep(60)")
run_logged([sys.executable, "-c", child], Path(sys.argv[1]))
"""


def test_a_killed_step_keeps_what_its_child_printed(tmp_path: Path) -> None:
    log = tmp_path / "torch-stack.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(log)], env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "downloading 40\n" not in (log.read_text() if log.exists() else ""):
            time.sleep(0.05)
        os.killpg(parent.pid, signal.SIGKILL)  # the tool and its child, at once: nothing gets to flush
    finally:
        parent.wait(timeout=30)
    text = log.read_text()
    assert "collecting torch-npu\n" in text and "downloading 40\n" in text
