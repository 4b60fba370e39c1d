"""`serve status` triages the log of a recorded server that is gone: its cause and fix, not only 'gone'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ascend_setup.serve.server_records import ServerRecord

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def _record(workdir: Path, name: str, log: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )  # a pid of ours that has ended: this record's server is gone
    record = ServerRecord(
        name=name,
        pid=int(finished.stdout),
        start_ticks=1,
        port=8000,
        cards=[0],
        log=str(log),
        argv=["vllm", "serve"],
        detached=True,
        started_at=0.0,
    )
    (workdir / "serve").mkdir(parents=True, exist_ok=True)
    (workdir / "serve" / f"{name}.server.json").write_text(record.model_dump_json())


def test_a_gone_server_is_shown_with_the_cause_its_log_names(cli, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    _record(workdir, "qwen", LOGS / "qkv-rmsnorm-rope.log")
    _record(workdir, "lost", tmp_path / "no-such.log")
    data = json.loads(cli("serve", "status", "--workdir", str(workdir), "--json").stdout)
    by_name = {row["name"]: row for row in data["servers"]}
    assert not by_name["qwen"]["running"] and by_name["qwen"]["cause"]["id"] == "qkv-rmsnorm-rope"
    assert by_name["qwen"]["cause"]["fix"] and by_name["lost"]["cause"] is None
    shown = cli("serve", "status", "--workdir", str(workdir))
    assert shown.returncode == 0, shown.stderr
    assert "qwen: gone" in shown.stdout and "cause (log line" in shown.stdout and "fix: " in shown.stdout
