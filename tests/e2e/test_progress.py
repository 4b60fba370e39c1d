"""What a person sees: in a terminal, a live line with the current action, elapsed time and log; off a
terminal, plain step lines (each naming its log), never hard-wrapped."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def _run_in_a_terminal(argv, env) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(master)
    assert proc.returncode == 0, b"".join(chunks)[-3000:]
    return ANSI.sub("", b"".join(chunks).decode(errors="replace"))


def test_a_terminal_shows_the_current_action(wheel_stack, tmp_path: Path) -> None:
    env = {k: v for k, v in wheel_stack.env().items() if k != "COLUMNS"}
    screen = _run_in_a_terminal(wheel_stack.install_argv(tmp_path / "wd"), env)
    log = str(tmp_path / "wd" / "logs" / "plugin-deps.log")
    assert re.search(r"plugin-deps: .* · \d+ s", screen) and log in screen  # the live line; the log on the step's line
    # the installer's own action on the live line: pip's words, or uv's (the default)
    assert re.search(
        r"(Collecting|Processing|Installing collected packages|Successfully installed|Resolved|"
        r"Prepared|Installed|Downloading) ",
        screen,
    ), screen[-2000:]


def test_off_a_terminal_lines_are_plain_and_whole(wheel_stack, tmp_path: Path) -> None:
    workdir = tmp_path / ("a-rather-long-workdir-name-" * 4) / "wd"
    env = {k: v for k, v in wheel_stack.env().items() if k != "COLUMNS"}
    proc = subprocess.run(wheel_stack.install_argv(workdir), capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\x1b[" not in proc.stderr and not re.search(r" · \d+ s", proc.stderr)  # no live line off a terminal
    log = str(workdir / "logs" / "plugin-deps.log")
    assert any(line.endswith(f"log: {log}") for line in proc.stderr.splitlines())  # a long path, unbroken
    assert f"  source {workdir}/venv/bin/activate" in proc.stdout.splitlines()  # one whole line
