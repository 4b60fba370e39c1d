"""serve against the simulated host's vllm: a real HTTP server in a real process group. Ready, smoke and measure
(tok/s within 5% of the rate the stub streams at), the first-request triton crash, an early exit and a deadline
each triaged, `serve stop` by pid and start time, and no process left after SIGINT, SIGTERM or SIGKILL."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest
from helpers.cli import clean_env
from helpers.serving import serving_venv

from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.model_dirs import build_model
from ascend_setup.utils.interrupts import descendants
from ascend_setup.utils.procs import pid_alive

RATE = re.compile(r"\[simulated\] decode rate ([\d.]+) tok/s")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("serve-e2e")
    return {
        "root": root,
        "a2": str(build_fake_cann(root / "A2").root),
        "310p": str(build_fake_cann(root / "310P", chip="310P3").root),
        "venv": str(serving_venv(root / "ok")),
        "shadowed": str(serving_venv(root / "shadowed", shadowed=True)),
        "post": str(serving_venv(root / "post", vllm="0.23.0+empty", plugin="0.23.0.post1")),
        "model": build_model(root / "models" / "dense", "dense"),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def argv(world: dict, workdir: Path, *extra: str, venv: str = "venv", cann: str = "a2") -> List[str]:
    return [
        sys.executable,
        "-m",
        "ascend_setup",
        "serve",
        str(world["model"]),
        "--venv",
        world[venv],
        "--workdir",
        str(workdir),
        "--cann-home",
        world[cann],
        "--port",
        str(free_port()),
        "--measure-tokens",
        "48",
        *extra,
    ]


def run(cmd: List[str], home: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(home, env), timeout=120)


def server_pids(log: Path) -> List[int]:
    """The API server's and the engine core's pids, as their log prefixes name them."""
    return sorted({int(p) for p in re.findall(r"pid=(\d+)\)", log.read_text())})


def all_gone(pids: List[int], within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(pid_alive(p, unknown=False) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_ready_smoke_measure_then_stop_by_pid_and_start_time(world: dict, tmp_path: Path, home: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in world["model"].iterdir()}
    proc = run(argv(world, tmp_path, "--detach", "--json"), home)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    log = tmp_path / "serve" / "dense.log"
    given = float(RATE.search(log.read_text()).group(1))
    assert abs(result["tok_s"] / given - 1) < 0.05, (result["tok_s"], given)
    assert result["answer"] == "Paris." and result["simulated"] is True and len(result["runs"]) == 3
    assert 0 < result["tpot_ms"] <= result["tpot_p90_ms"] and 0 < result["itl_ms"] <= result["itl_p90_ms"]
    assert result["ttft_s"] < result["e2el_s"]
    saved = json.loads((tmp_path / "serve" / "dense.json").read_text())
    for key in ("card", "cann", "tp", "graph_mode", "model", "bytes_per_token", "tok_s"):
        assert key in saved
    assert saved["card"] == "910B3" and saved["graph_mode"] is True and saved["predicted_tok_s"] > 0
    pids = server_pids(log)
    assert len(pids) == 2 and all(pid_alive(p) for p in pids)  # detached: it outlives the tool
    status = json.loads(
        run(
            [sys.executable, "-m", "ascend_setup", "serve", "status", "--workdir", str(tmp_path), "--json"], home
        ).stdout
    )
    assert status["servers"][0]["running"] is True
    second = run(argv(world, tmp_path), home)  # the same card, a free port: another server of ours is there
    assert second.returncode == 3, second.stderr
    stop = run([sys.executable, "-m", "ascend_setup", "serve", "stop", "dense", "--workdir", str(tmp_path)], home)
    assert stop.returncode == 0, stop.stderr
    assert all_gone(pids)
    assert {p.name: p.stat().st_mtime_ns for p in world["model"].iterdir()} == before


def test_a_post_release_and_a_source_built_vllm_pass_preflight_and_serve(
    world: dict, tmp_path: Path, home: Path
) -> None:
    """vllm-ascend 0.23.0.post1 (the current 0.23 release) and a vLLM built with VLLM_TARGET_DEVICE=empty: the
    row's pins, said so; the dry run runs the same check and says what it found."""
    proc = run(argv(world, tmp_path, "--json", "--detach", venv="post"), home)
    assert proc.returncode == 0, proc.stderr
    stop = run([sys.executable, "-m", "ascend_setup", "serve", "stop", "--workdir", str(tmp_path)], home)
    assert stop.returncode == 0, stop.stderr
    assert "note: vllm 0.23.0+empty: a source build (+empty) of 0.23.0; accepted" in proc.stderr
    assert "vllm-ascend 0.23.0.post1: a newer post release of the row's 0.23.0" in proc.stderr
    assert json.loads(proc.stdout)["versions"] == {"vllm": "0.23.0+empty", "vllm-ascend": "0.23.0.post1"}
    dry = run(argv(world, tmp_path, "--dry-run", venv="post"), home)
    assert dry.returncode == 0, dry.stderr
    assert "# version: vllm-ascend 0.23.0.post1: a newer post release" in dry.stdout
    old = serving_venv(tmp_path / "old", plugin="0.22.0")
    dry = run(argv(world, tmp_path, "--dry-run", "--json") + ["--venv", str(old)], home)
    refused = [v for v in json.loads(dry.stdout)["versions"] if not v["accepted"]]
    assert [v["note"] for v in refused] == ["vllm-ascend 0.22.0 where the row pins 0.23.0"]
    start = run(argv(world, tmp_path) + ["--venv", str(old)], home)
    assert start.returncode == 1 and "vllm-ascend 0.22.0 where the row pins 0.23.0" in start.stderr


def test_a_served_name_after_dashes_is_served_and_waited_for(world: dict, tmp_path: Path, home: Path) -> None:
    """`--served_model_name foo` (the underscore spelling): vLLM serves `foo`, and readiness waits for `foo`."""
    proc = run(argv(world, tmp_path, "--json", "--detach") + ["--", "--served_model_name", "foo"], home)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["served_name"] == "foo" and result["answer"] == "Paris." and result["host"] == "127.0.0.1"
    assert result["exposed"] is False
    stop = run([sys.executable, "-m", "ascend_setup", "serve", "stop", "--workdir", str(tmp_path)], home)
    assert stop.returncode == 0, stop.stderr


def test_the_stub_vllm_refuses_what_the_real_parser_refuses(world: dict, tmp_path: Path) -> None:
    vllm = Path(world["venv"]) / "bin" / "vllm"
    proc = subprocess.run(
        [str(vllm), "serve", str(world["model"]), "--no-such-flag"], capture_output=True, text=True, timeout=60
    )
    assert (
        proc.returncode == 2 and proc.stderr.splitlines()[-1] == "vllm: error: unrecognized arguments: --no-such-flag"
    )


def _stub(world: dict, tmp_path: Path, *extra: str, venv: str = "venv"):
    """The stub vLLM serving the dense model on a free loopback port: (process, base URL)."""
    from ascend_setup.serve.run import http_get

    port = free_port()
    proc = subprocess.Popen(
        [
            str(Path(world[venv]) / "bin" / "vllm"),
            "serve",
            str(world["model"]),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--enforce-eager",
            *extra,
        ],
        stdout=(tmp_path / "stub.log").open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "VLLM_SIM_PHASE_SECONDS": "0.01"},
    )
    base = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 30
    while http_get(f"{base}/health") is None and time.monotonic() < end:
        time.sleep(0.05)
    return proc, base


def test_the_stub_keeps_the_real_servers_contract(world: dict, tmp_path: Path) -> None:
    """/version, /metrics with vLLM's names, and a prefix cache that makes a repeated prompt's TTFT a hit."""
    from ascend_setup.serve.measure import PROMPT, fresh_prompt
    from ascend_setup.serve.run import http_get
    from ascend_setup.serve.smoke import stream

    proc, base = _stub(world, tmp_path)
    try:
        assert json.loads(http_get(f"{base}/version") or b"{}") == {"version": "0.23.0"}

        def ttft(prompt: str) -> float:
            sent = time.perf_counter()
            first = next(
                arrived
                for arrived, _ in stream(
                    f"{base}/v1/completions", {"model": str(world["model"]), "prompt": prompt, "max_tokens": 2}, 30
                )
            )
            return first - sent

        repeated = PROMPT * 8  # 7 blocks of 128 words: about 1.8 s of simulated prefill
        cold, warm, fresh = ttft(repeated), ttft(repeated), ttft(fresh_prompt() + PROMPT * 7)
        assert warm < cold / 3 and fresh > cold * 0.8, (cold, warm, fresh)  # a fresh prefix is a real prefill
        metrics = (http_get(f"{base}/metrics") or b"").decode()
        for name in (
            "vllm:num_preemptions_total",
            "vllm:time_to_first_token_seconds_count",
            "vllm:inter_token_latency_seconds_sum",
            "vllm:e2e_request_latency_seconds_count",
            "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total",
        ):
            assert f"{name}{{" in metrics, name
        assert "Capturing CUDA graphs" not in (tmp_path / "stub.log").read_text()  # eager: no capture
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_stub_fails_mid_stream_with_200_an_error_event_and_done(world: dict, tmp_path: Path) -> None:
    import urllib.request

    proc, base = _stub(world, tmp_path, venv="shadowed")
    try:
        request = urllib.request.Request(
            f"{base}/v1/completions",
            data=json.dumps({"model": str(world["model"]), "prompt": "hi", "max_tokens": 4, "stream": True}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            status, events = response.status, [line.decode().strip() for line in response if line.strip()]
        assert status == 200 and events[-1] == "data: [DONE]"
        assert json.loads(events[0][5:])["error"]["type"] == "InternalServerError"
    finally:
        proc.wait(timeout=10)


def test_the_first_request_triton_crash_is_triaged(world: dict, tmp_path: Path, home: Path) -> None:
    """A 310P host (no HAS_TRITON preflight there) whose venv has upstream triton: start-up passes, the first
    request crashes, and the cause is the shadowing, with its fix."""
    proc = run(argv(world, tmp_path, venv="shadowed", cann="310p"), home)
    assert proc.returncode == 1, proc.stderr
    assert "'function' object is not subscriptable" in proc.stderr and "triton" in proc.stderr.lower()
    assert all_gone(server_pids(tmp_path / "serve" / "dense.log"))


def test_has_triton_false_on_a2_stops_before_start(world: dict, tmp_path: Path, home: Path) -> None:
    proc = run(argv(world, tmp_path, venv="shadowed"), home)
    assert proc.returncode == 1
    assert "HAS_TRITON is False on an A2 host" in proc.stderr
    assert not (tmp_path / "serve" / "dense.log").exists()


def test_an_early_exit_is_triaged(world: dict, tmp_path: Path, home: Path) -> None:
    proc = run(argv(world, tmp_path), home, VLLM_SIM_FAIL="early")
    assert proc.returncode == 1
    assert "vllm serve exited with status 1 while loading weights" in proc.stderr
    assert "libatb.so" in proc.stderr  # the root cause, not 'Engine core initialization failed'
    assert all_gone(server_pids(tmp_path / "serve" / "dense.log"))


def test_a_deadline_is_triaged_and_the_group_stopped(world: dict, tmp_path: Path, home: Path) -> None:
    """After an early exit in the same workdir: the log keeps both attempts, and only this one's is triaged."""
    assert run(argv(world, tmp_path), home, VLLM_SIM_FAIL="early").returncode == 1
    proc = run(argv(world, tmp_path, "--ready-timeout", "4"), home, VLLM_SIM_FAIL="hang")
    assert proc.returncode == 1
    assert "not ready after 4 s (last phase: capturing graphs)" in proc.stderr
    assert "No available shared memory broadcast block found" in proc.stderr  # the hang's own words
    assert "libatb" not in proc.stderr  # the earlier attempt's cause is not this one's
    assert all_gone(server_pids(tmp_path / "serve" / "dense.log"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_process_is_left_when_the_tool_stops(world: dict, tmp_path: Path, home: Path, sig: int) -> None:
    tool = subprocess.Popen(
        argv(world, tmp_path),
        env=clean_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    record = tmp_path / "serve" / "dense.server.json"
    end = time.monotonic() + 60
    while time.monotonic() < end and not (record.exists() and json.loads(record.read_text()).get("figures")):
        time.sleep(0.2)  # serving in the foreground, measured
    pids = [*descendants(tool.pid)]
    assert len(pids) >= 2, "the server and its engine core run under the tool"
    os.kill(tool.pid, sig)
    tool.wait(timeout=30)
    assert all_gone(pids), [p for p in pids if pid_alive(p, unknown=False)]


def test_serve_stop_ends_a_foreground_server_cleanly(world: dict, tmp_path: Path, home: Path) -> None:
    tool = subprocess.Popen(
        argv(world, tmp_path), env=clean_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    record = tmp_path / "serve" / "dense.server.json"
    end = time.monotonic() + 60
    while time.monotonic() < end and not (record.exists() and json.loads(record.read_text()).get("figures")):
        time.sleep(0.2)
    pids = server_pids(tmp_path / "serve" / "dense.log")
    stop = run([sys.executable, "-m", "ascend_setup", "serve", "stop", "--workdir", str(tmp_path)], home)
    assert stop.returncode == 0, stop.stderr
    _, err = tool.communicate(timeout=30)
    assert tool.returncode == 0 and "dense stopped" in err, err
    assert all_gone(pids)
