"""`bench NAME` triages a level that fails: the recorded server's log, from where the sweep started, names the
cause and its fix (an earlier start's failure in the same log is not the answer). A bench by --url has no log."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from ascend_setup.serve.server_records import ServerRecord
from ascend_setup.utils.procstat import start_ticks

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
OOM = (
    "(EngineCore_DP0 pid=4121) ERROR 12-01 09:00:01 [core.py:708] RuntimeError: NPU out of memory. "
    "Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity)"
)


@pytest.fixture
def failing_server(tmp_path: Path) -> Iterator[dict]:
    """A server that lists one model and fails every completion, printing an NPU OOM in its log as it does."""
    log = tmp_path / "dense.log"
    log.write_bytes((LOGS / "qkv-rmsnorm-rope.log").read_bytes())  # an earlier start of it that failed otherwise

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"data": [{"id": "dense", "max_model_len": 4096}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with log.open("a") as out:
                out.write(f"{OOM}\n(APIServer pid=4050) ERROR 12-01 09:00:01 [serving.py:1] EngineDeadError\n")
            self.send_response(500)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    workdir = tmp_path / "wd"
    (workdir / "serve").mkdir(parents=True)
    record = ServerRecord(
        name="dense",
        pid=os.getpid(),
        start_ticks=start_ticks(os.getpid()) or 0,
        port=server.server_address[1],
        cards=[0],
        log=str(log),
        argv=["vllm", "serve"],
        detached=True,
        started_at=0.0,
    )  # this test's process stands for the running server
    (workdir / "serve" / "dense.server.json").write_text(record.model_dump_json())
    yield {"workdir": workdir, "log": log, "url": f"http://127.0.0.1:{server.server_address[1]}"}
    server.shutdown()
    server.server_close()


def test_a_level_that_fails_is_triaged_from_the_servers_log(cli, failing_server: dict) -> None:
    proc = cli(
        "bench",
        "dense",
        "--workdir",
        str(failing_server["workdir"]),
        "--concurrency",
        "1",
        "--requests",
        "1",
        "--output-len",
        "8",
    )
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ascend-setup: error: a request at concurrency 1 failed"), last
    assert "out of memory" in last and "gpu-memory-utilization" in last and str(failing_server["log"]) in last
    assert "qkv" not in last.lower()  # the earlier start's failure, before the sweep, is not this one


def test_a_url_has_no_log_to_triage(cli, failing_server: dict) -> None:
    proc = cli("bench", "--url", failing_server["url"], "--concurrency", "1", "--requests", "1", "--output-len", "8")
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "a request at concurrency 1 failed" in last and "out of memory" not in last
