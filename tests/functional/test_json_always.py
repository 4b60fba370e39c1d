"""Every read command under --json prints exactly one JSON document on stdout, whatever happens: success or
findings, bad input, an index that never answers, a signal mid-run, a defect. Generated over the commands.

`doctor --json` once printed nothing on stdout in the fleet's doctor play, and Ansible's `from_json` failed.
A --json caller must always be able to parse what it gets."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from helpers.cli import clean_env

#: Each read command with arguments that run it for real on a machine with no CANN, no network and an
#: empty HOME ({t}: a temp dir; {hole}: an index that accepts connections and never answers).
READ_COMMANDS: Dict[str, List[str]] = {
    "status": ["status", "--workdir", "{t}/wd"],
    "plan": [
        "plan",
        "--cann",
        "9.1.0",
        "--arch",
        "aarch64",
        "--glibc",
        "2.31",
        "--python",
        "3.11",
        "--index-url",
        "{hole}",
    ],
    "audit": ["audit", "--venv", "{t}"],
    "mirrors": ["mirrors", "--only", "--candidate", "{hole}", "--budget", "1", "--workdir", "{t}/wd"],
    "doctor": ["doctor", "--workdir", "{t}/wd", "--index-url", "{hole}"],
    "container run-command": ["container", "run-command", "--root", "{t}"],
    "fit": ["fit", "{t}/no-model"],
    "fit --calibration": ["fit", "--calibration"],
    "triage": ["triage", "{t}/build.log"],
    "matrix list": ["matrix", "list"],
    "matrix show": ["matrix", "show", "9.1.0"],
    "matrix validate": ["matrix", "validate"],
    "matrix check": ["matrix", "check"],
    "fleet report": ["fleet", "report", "{t}"],
    "bundle verify": ["bundle", "verify", "{t}"],
    "probe": ["probe", "--device", "cpu", "--venv", "{t}/no-venv", "--workdir", "{t}/wd"],
}


@pytest.fixture(scope="module")
def hole() -> Iterator[str]:
    """An index that accepts every connection and never answers (a firewall that drops, a hung mirror)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: List[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/simple/"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def argv(name: str, tmp_path: Path, hole: str) -> List[str]:
    (tmp_path / "build.log").write_text("Collecting vllm\nERROR: No matching distribution found for vllm==0.23.0\n")
    return [a.format(t=tmp_path, hole=hole) for a in READ_COMMANDS[name]] + ["--json"]


def one_document(stdout: str) -> dict:
    """The whole of stdout is one JSON object (a second document, or nothing, fails to parse)."""
    data = json.loads(stdout)
    assert isinstance(data, dict), stdout
    return data


def start(args: List[str], home: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ascend_setup", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(home),
    )


@pytest.mark.parametrize("name", sorted(READ_COMMANDS))
def test_a_run_prints_one_document(name: str, tmp_path: Path, home: Path, hole: str) -> None:
    proc = start(argv(name, tmp_path, hole), home)
    stdout, stderr = proc.communicate(timeout=300)
    data = one_document(stdout)
    assert proc.returncode in (0, 1, 2), (proc.returncode, stderr)
    if proc.returncode == 2:
        assert data["exit"] == 2 and data["error"], data
    assert "Traceback" not in stderr


@pytest.mark.parametrize("name", sorted(READ_COMMANDS))
def test_a_refused_flag_prints_one_document(name: str, tmp_path: Path, home: Path, hole: str) -> None:
    proc = start(argv(name, tmp_path, hole) + ["--no-such-flag"], home)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 2, stderr
    assert one_document(stdout)["exit"] == 2
    assert len(stderr.strip().splitlines()) == 1, stderr


def catches(pid: int, signum: int) -> bool:
    """Whether the process has its own handler for `signum` yet (the kernel's SigCgt mask): a signal sent
    earlier meets Python's default and kills it before the tool has started."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask >> (signum - 1) & 1)


@pytest.mark.parametrize("name", ["plan", "doctor", "mirrors", "status", "triage"])
def test_a_signal_mid_run_prints_one_document(name: str, tmp_path: Path, home: Path, hole: str) -> None:
    proc = start(argv(name, tmp_path, hole), home)
    deadline = time.monotonic() + 60
    while proc.poll() is None and not catches(proc.pid, signal.SIGTERM) and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    data = one_document(stdout)  # the command's own document when it had printed it, else the error's
    if proc.returncode == 128 + signal.SIGTERM and "error" in data:
        assert data == {"error": data["error"], "hint": None, "exit": 143} and "SIGTERM" in data["error"], data
        assert "interrupted by SIGTERM" in stderr


def test_a_defect_prints_one_line_and_one_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exception no layer expected: one line naming it, the error document, exit 1; no traceback."""
    from ascend_setup.cli import main as cli
    from ascend_setup.commands import triage

    def broken(args: object, output: object) -> int:
        raise KeyError("a defect")

    monkeypatch.setattr(triage, "run", broken)
    monkeypatch.setattr(cli, "install_handlers", lambda *a, **k: None)  # leave pytest's own signal handling be
    monkeypatch.delenv("ASCEND_SETUP_DEBUG", raising=False)
    assert cli.main(["triage", "-", "--json"]) == 1
    captured = capsys.readouterr()
    assert one_document(captured.out) == {
        "error": "internal error: KeyError: 'a defect'",
        "hint": "a defect of ascend-setup: run again with ASCEND_SETUP_DEBUG=1 for the traceback, and report it",
        "exit": 1,
    }
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
