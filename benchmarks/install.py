"""Benchmark, for uv (the default) and for pip: the install's overhead over the same commands typed by hand
(loopback index), and the time from a rerun's start to its first new work after a SIGKILL.

    python benchmarks/install.py
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import clean_env, serve_stack

ORDER = ["venv", "cann-python-deps", "torch-stack", "vllm", "plugin-deps", "triton", "vllm-ascend"]


def measure(tmp: Path, host, env: dict, installer: str) -> None:
    """One installer's figures, each install in its own workdir under `tmp/installer`."""
    tmp = tmp / installer
    tmp.mkdir()

    def argv(workdir: Path):
        return [sys.executable, "-m", "ascend_setup", "install", "--cann", "9.1.0", "--cann-home", str(host.cann.root),
                *host.index_args(), "--mirror", "none", "--yes",
                "--workdir", str(workdir), "--python", sys.executable, "--installer", installer]

    workdir = tmp / "tool"
    start = time.perf_counter()
    proc = subprocess.run(argv(workdir), capture_output=True, text=True, env=env)
    ours = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])

    # The same commands by hand: replay every command the steps logged, into a fresh venv.
    by_hand = tmp / "by-hand"
    commands = []
    for step in ORDER:
        for line in (workdir / "logs" / f"{step}.log").read_text().splitlines():
            if line.startswith("$ "):
                commands.append(line[2:].replace(str(workdir), str(by_hand)))
    by_hand.mkdir()
    shutil.copytree(workdir / "lock", by_hand / "lock")  # the hash-pinned files a person would write
    shutil.copytree(workdir / "downloads", by_hand / "downloads")
    start = time.perf_counter()
    for command in commands:
        subprocess.run(command.split(), capture_output=True, text=True, env=env, check=True)
    hand = time.perf_counter() - start

    # A kill in the middle, then the time from the rerun's start to its first new work.
    killed = tmp / "killed"
    child = subprocess.Popen(argv(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    while not (killed / "logs" / "plugin-deps.log").exists() and child.poll() is None:
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    start = time.perf_counter()
    rerun = subprocess.Popen(argv(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_new_work = None
    for line in rerun.stderr:
        if line.startswith("→") and first_new_work is None:
            first_new_work = time.perf_counter() - start
            resumed_at = line.split(":")[0]
    rerun.wait()

    print(f"--installer {installer}: commands the install ran: {len(commands)}")
    print(f"  ascend-setup install (all steps, checks, state): {ours:.1f} s")
    print(f"  the same commands typed by hand:                 {hand:.1f} s")
    print(f"  overhead ratio ours/by-hand: {ours / hand:.2f}x")
    print(f"  rerun after a SIGKILL mid-install: first new work after {first_new_work:.2f} s ({resumed_at})")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-install-"))
    _, host = serve_stack(tmp)
    env = clean_env(tmp)
    for installer in ("uv", "pip"):
        measure(tmp, host, env, installer)
    host.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
