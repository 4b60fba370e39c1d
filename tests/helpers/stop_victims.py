"""Run inside a PID namespace of its own (`unshare --pid --fork --mount-proc`, as root) by
tests/functional/test_stop_proof.py: plant one victim and a record (or a Started) that names it, ask one place
of the tool that stops processes to stop it, and print what became of the victim and of a canary, as JSON.

In the namespace this script is pid 1, so a tool that signalled pid 1 or `kill(-1)` would end only the
namespace (this script, the canary), never the host's processes, and the test would see it.

    python stop_victims.py SITE CASE WORKDIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from ascend_setup.serve.server_records import SUFFIX, ServerRecord, serve_dir
from ascend_setup.utils.procs import RUN_TOKEN_VAR, Started, new_run_token, pid_alive, stop_carriers
from ascend_setup.utils.procstat import start_ticks

NOBODY = 65534
SLEEP = ["sleep", "300"]


def spawn(token: str = "", user: bool = False) -> subprocess.Popen:
    """A sleeper leading a group of its own: ours, or nobody's; carrying `token` when given."""
    env = {**os.environ, **({RUN_TOKEN_VAR: token} if token else {})}
    argv = (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if user else []) + SLEEP
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    end = time.monotonic() + 10
    while user and time.monotonic() < end and os.stat(f"/proc/{proc.pid}").st_uid != NOBODY:
        time.sleep(0.01)  # setpriv has changed uid and exec'd sleep
    return proc


def plant(case: str, workdir: Path) -> Dict[str, Any]:
    """The victim of `case`, and the record (as JSON) that names it."""
    token = new_run_token()
    victim = None
    if case == "pid-1":
        pid, ticks = 1, start_ticks(1) or 0
    elif case == "another-user":
        victim = spawn(token, user=True)
        pid, ticks = victim.pid, start_ticks(victim.pid) or 0
    elif case == "forged-start-time":
        victim = spawn(token)
        pid, ticks = victim.pid, (start_ticks(victim.pid) or 0) + 1
    elif case in ("no-token", "record-without-token"):
        victim = spawn("" if case == "no-token" else token)
        pid, ticks = victim.pid, start_ticks(victim.pid) or 0
    else:  # the record cases: a real server of ours, which only the record's own flaw keeps from being stopped
        victim = spawn(token)
        pid, ticks = victim.pid, start_ticks(victim.pid) or 0
    record: Dict[str, Any] = ServerRecord(
        name="victim",
        pid=max(pid, 2),
        start_ticks=ticks,
        port=8000,
        cards=[0],
        log=str(workdir / "serve" / "victim.log"),
        argv=["vllm"],
        detached=True,
        started_at=time.time(),
        token=token,
    ).model_dump()
    record["pid"] = pid
    if case == "record-without-token":
        del record["token"]
    if case == "pid-as-text":
        record["pid"] = str(pid)
    return {"victim": victim, "record": record, "token": token}


def write_record(case: str, workdir: Path, record: Dict[str, Any]) -> str:
    """The record where serve keeps it; the name `serve stop` is given."""
    serve_dir(workdir).mkdir(parents=True, exist_ok=True)
    if case == "dotdot-name":  # a victim's record outside the workdir, which the name points at
        outside = workdir.parent / "victim.server.json"
        outside.write_text("{}")
        record["name"] = "../victim"
    if case == "escape-name":
        record["name"] = "vic\x1b]0;owned\x07tim"
    path = serve_dir(workdir) / f"{record['name'].replace('/', '_')}{SUFFIX}"
    if case == "dotdot-name":
        path = serve_dir(workdir) / f"..%2Fvictim{SUFFIX}"
    path.write_text(json.dumps(record))
    if case == "foreign-record":
        os.chown(path, NOBODY, NOBODY)
    if case == "foreign-workdir":
        os.chown(path.parent, NOBODY, NOBODY)
    return record["name"]


def stop(site: str, case: str, workdir: Path, planted: Dict[str, Any]) -> Dict[str, Any]:
    record = planted["record"]
    if site == "serve stop":
        name = write_record(case, workdir, record)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ascend_setup",
                "serve",
                "stop",
                *([] if case in ("dotdot-name", "escape-name") else [name]),
                "--workdir",
                str(workdir),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return {"code": done.returncode, "stderr": done.stderr, "stdout": done.stdout}
    started = Started(int(record["pid"]), record["start_ticks"], record.get("token"))
    if site == "serve's own stop":
        return {"refusal": started.stop(0.5)}
    if site == "fan-out's stop":
        return {"refusal": started.stop(0.0, carriers=False)}
    assert site == "escaped-process sweep"
    stop_carriers(planted["token"], grace=0.0)
    return {"refusal": None}


def main() -> None:
    site, case, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    assert os.getpid() == 1, "run me in a PID namespace of my own"
    canary = subprocess.Popen(SLEEP)
    planted = plant(case, workdir)
    result = stop(site, case, workdir, planted)
    time.sleep(0.3)  # a signal sent would have landed
    victims: List[subprocess.Popen] = [p for p in (planted["victim"], canary) if p is not None]
    result["alive"] = [p.poll() is None and pid_alive(p.pid, unknown=False) for p in victims]
    result["outside"] = sorted(p.name for p in workdir.parent.iterdir() if p != workdir)
    for proc in victims:
        proc.kill()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
