"""Every place that stops a process signals only a process this tool started, proven: generated over each stop
site and each hostile record (pid 1, another user's process, a forged start time, no run token, a record
without one, a `../` name, a pid as text, an escape in the name, a record or records folder another user
owns). Each case runs in
a PID namespace of its own (tests/helpers/stop_victims.py), so a regression that signalled pid 1 or kill(-1)
would end that namespace, not the machine: the victim and a canary must live, nothing outside the workdir may
change, and `serve stop` must say one line and exit 2. Then the happy paths: a real server of ours, and what
it left in a session of its own, are stopped; a node command's setsid grandchild is ended with the fan-out,
and a node's stdout flood is cut."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import pytest
import yaml
from helpers.cli import REPO, assert_one_line_error, clean_env

from ascend_setup.utils.procs import RUN_TOKEN_VAR, new_run_token, pid_alive
from ascend_setup.utils.procstat import start_ticks

DRIVER = REPO / "tests" / "helpers" / "stop_victims.py"
PROCESS_CASES = ["pid-1", "another-user", "forged-start-time", "no-token", "record-without-token"]
RECORD_CASES = ["dotdot-name", "pid-as-text", "escape-name", "foreign-record", "foreign-workdir"]
SITES: Dict[str, List[str]] = {
    "serve stop": PROCESS_CASES + RECORD_CASES,
    "serve's own stop": PROCESS_CASES,  # serve's foreground server and its failures: utils/procs.Started.stop
    "fan-out's stop": PROCESS_CASES,  # a node command past its timeout: the group only
    "escaped-process sweep": ["another-user"],  # the end of a fan-out: every process carrying its token
}
CASES = [pytest.param(site, case, id=f"{site}:{case}") for site, cases in SITES.items() for case in cases]


def _namespaces() -> str:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        return "needs root, unshare and setpriv (a PID namespace, another user's process)"
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return "" if done.returncode == 0 else f"no PID namespace here: {done.stderr.decode().strip()}"


WHY_NOT = _namespaces()


@pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)
@pytest.mark.parametrize(("site", "case"), CASES)
def test_nothing_that_is_not_proven_ours_is_signalled(site: str, case: str, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(DRIVER), site, case, str(workdir)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout, done.stderr  # the namespace's pid 1 (the driver) lived
    result = json.loads(done.stdout.splitlines()[-1])
    assert all(result["alive"]), result  # the victim and the canary
    assert result["outside"] == (["victim.server.json"] if case == "dotdot-name" else []), result
    if case == "dotdot-name":
        assert (tmp_path / "victim.server.json").read_text() == "{}"
    if site == "serve stop":
        line = assert_one_line_error(
            subprocess.CompletedProcess([], result["code"], result["stdout"], result["stderr"])
        )
        assert not [c for c in line if ord(c) < 32 or ord(c) == 0x7F], line
        assert "Traceback" not in result["stderr"] and "internal error" not in line
        assert (workdir / "serve").is_dir() and list((workdir / "serve").iterdir()), "the record is kept"
    else:
        assert site == "escaped-process sweep" or result["refusal"], result


def _record(workdir: Path, pid: int, token: str) -> None:
    from ascend_setup.serve.server_records import ServerRecord, save

    save(
        workdir,
        ServerRecord(
            name="dense",
            pid=pid,
            start_ticks=start_ticks(pid) or 0,
            port=8000,
            cards=[0],
            log=str(workdir / "serve" / "dense.log"),
            argv=["vllm"],
            detached=True,
            started_at=time.time(),
            token=token,
        ),
    )


SERVER = """
import os, subprocess, sys, time
# what a server may leave: a grandchild that leaves the group and the session (it keeps the environment)
subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
time.sleep(300)
"""


def _wait_for(pids_of: Callable[[], List[int]], count: int) -> List[int]:
    end = time.monotonic() + 20
    while time.monotonic() < end:
        found = pids_of()
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError("the processes did not start")


def _gone(pids: List[int], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while any(pid_alive(p, unknown=False) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(pid_alive(p, unknown=False) for p in pids)


def test_a_real_server_of_ours_and_its_escaped_grandchild_are_stopped(cli, tmp_path: Path) -> None:
    from ascend_setup.utils.procs import carriers

    token = new_run_token()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], env={**os.environ, RUN_TOKEN_VAR: token}, start_new_session=True
    )
    pids = _wait_for(lambda: carriers(token), 2)
    _record(tmp_path, server.pid, token)
    done = cli("serve", "stop", "dense", "--workdir", str(tmp_path))
    server.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert "stopped dense" in done.stdout
    assert _gone(pids), [p for p in pids if pid_alive(p, unknown=False)]
    assert not (tmp_path / "serve" / "dense.server.json").exists()


def test_a_gone_server_s_record_is_removed_and_nothing_signalled(cli, tmp_path: Path) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    _record(tmp_path, proc.pid, new_run_token())
    done = cli("serve", "stop", "--workdir", str(tmp_path))
    assert done.returncode == 0 and "was no longer running" in done.stdout, done.stderr


def _inventory(tmp_path: Path, run: List[str], timeout: float = 20) -> Path:
    inventory = tmp_path / "nodes.yml"
    inventory.write_text(yaml.safe_dump({"nodes": [{"name": "n1", "run": run}], "timeout": timeout}))
    return inventory


ESCAPER = """
import os, subprocess, sys
# the node command leaves a grandchild in a session of its own, then answers (badly) and exits
child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(child.pid))
print("not facts")
"""


def test_a_node_command_s_setsid_grandchild_is_ended(cli, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = tmp_path / "escaper.py"
    script.write_text(ESCAPER)
    done = cli("doctor", "--nodes", str(_inventory(tmp_path, [sys.executable, str(script), str(pid_file)])), "--json")
    assert done.returncode == 1, done.stderr
    pid = int(pid_file.read_text())
    assert _gone([pid]), f"the grandchild {pid} outlived doctor --nodes"


def test_a_node_command_that_clears_its_environment_is_still_ended_at_its_timeout(cli, tmp_path: Path) -> None:
    """Our own child, not yet collected, is proven ours by that: a prefix that drops the token (env -i) or
    changes user is still killed at the node timeout."""
    pid_file = tmp_path / "node.pid"
    run = ["sh", "-c", f'echo $$ > {pid_file}; exec env -i sleep 300']
    start = time.monotonic()
    done = cli("doctor", "--nodes", str(_inventory(tmp_path, run, timeout=2)), "--json")
    assert done.returncode == 1 and "no answer in 2 s" in done.stdout, done.stdout
    assert time.monotonic() - start < 30
    assert _gone([int(pid_file.read_text())], within=1.0)


FLOOD = "import sys\nchunk = 'x' * 65536\nwhile True:\n    sys.stdout.write(chunk)\n"


def test_a_node_s_stdout_flood_is_cut(tmp_path: Path) -> None:
    """Read up to the cap, then cut with a note: bounded in memory (the child's peak RSS) and ended long
    before the node timeout."""
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    inventory = _inventory(tmp_path, [sys.executable, str(script)], timeout=120)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "doctor", "--nodes", str(inventory), "--json"],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=120,
    )
    seconds = time.monotonic() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert done.returncode == 1, done.stderr
    (problem,) = json.loads(done.stdout)["problems"]
    assert "cut there" in problem["message"] and "8388608 bytes" in problem["message"], problem
    assert seconds < 100, seconds  # the node timeout is 120 s: the cut, not the timeout, ended it
    assert peak_kib < 400 * 1024 or peak_kib == before, peak_kib


def test_serve_status_shows_a_record_s_escapes_visibly(cli, tmp_path: Path) -> None:
    from ascend_setup.serve.server_records import ServerRecord, save

    save(
        tmp_path,
        ServerRecord(
            name="dense",
            pid=4242,
            start_ticks=1,
            port=8000,
            cards=[0],
            log="/w/\x1b]0;owned\x07dense.log",
            argv=["vllm"],
            detached=True,
            started_at=1.0,
            figures="ready\x1b[2J in 1 s",
        ),
    )
    done = cli("serve", "status", "--workdir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "\\x1b]0;owned\\x07dense.log" in done.stdout and "ready\\x1b[2J in 1 s" in done.stdout
