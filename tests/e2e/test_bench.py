"""bench against the simulated host's vllm, a server `serve --detach` started: the sweep's figures per level
within 5% of the rate the stub streams at, the table, the heartbeat; and its bad input (a name not running, a
URL that does not answer, lengths above max_model_len, --concurrency 0), each one line."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest
from helpers.cli import clean_env
from helpers.serving import serving_venv

from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.model_dirs import build_model

BENCH = [sys.executable, "-m", "ascend_setup", "bench"]
RATE = re.compile(r"\[simulated\] decode rate ([\d.]+) tok/s")


def run(cmd: List[str], home: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(home, env), timeout=120)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("bench")
    workdir, home_dir = root / "work", root / "home"
    home_dir.mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = run([sys.executable, "-m", "ascend_setup", "serve", str(build_model(root / "models" / "dense", "dense")),
                "--venv", str(serving_venv(root / "venv")), "--workdir", str(workdir), "--cann-home",
                str(build_fake_cann(root / "A2").root), "--port", str(port), "--measure-tokens", "8", "--detach",
                "--json"], home_dir)
    assert proc.returncode == 0, proc.stderr
    rate = float(RATE.search((workdir / "serve" / "dense.log").read_text()).group(1))
    yield {"workdir": workdir, "rate": rate, "url": f"http://127.0.0.1:{port}"}
    run([sys.executable, "-m", "ascend_setup", "serve", "stop", "dense", "--workdir", str(workdir)], home_dir)


def bench(served: dict, home: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return run([*BENCH, "dense", "--workdir", str(served["workdir"]), *extra], home, **env)


def test_a_sweep_gives_each_levels_figures_at_the_rate_the_stub_was_given(served: dict, home: Path) -> None:
    proc = bench(served, home, "--concurrency", "1,4", "--requests", "4", "--output-len", "24", "--json")
    assert proc.returncode == 0, proc.stderr
    levels = json.loads(proc.stdout)["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4] and all(lv["requests"] == 4 for lv in levels)
    for lv in levels:
        assert abs(1000 / lv["tpot_ms"] / served["rate"] - 1) < 0.05, (lv, served["rate"])
        assert abs(1000 / lv["itl_ms"] / served["rate"] - 1) < 0.05, (lv, served["rate"])
        assert 0 < lv["ttft_s"] < lv["e2el_s"] and lv["tpot_ms"] <= lv["tpot_p90_ms"]
    assert levels[1]["output_tok_s"] > 3 * levels[0]["output_tok_s"]  # the current stub: every stream at full rate
    assert proc.stderr.count("bench: concurrency") == 4  # the heartbeat: each level's start and end


def test_the_table_fits_80_columns(served: dict, home: Path) -> None:
    proc = bench(served, home, "--concurrency", "2", "--requests", "2", "--output-len", "8", COLUMNS="80")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any("TPOT" in line for line in lines) and max(len(line) for line in lines) <= 80, proc.stdout


def test_bad_input_is_one_line(served: dict, tmp_path: Path, home: Path) -> None:
    cases: List[tuple] = [
        ([*BENCH, "gone", "--workdir", str(served["workdir"])], 2, "no server named 'gone'"),
        ([*BENCH, "--url", served["url"], "--input-len", "40000", "--output-len", "1000"], 2, "max_model_len 40960"),
        ([*BENCH, "dense", "--concurrency", "0"], 2, "--concurrency"),
        ([*BENCH, "dense", "--concurrency", "2,2"], 2, "twice"),
        ([*BENCH], 2, "NAME or --url"),
    ]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        silent = f"http://127.0.0.1:{sock.getsockname()[1]}"
        cases.append(([*BENCH, "--url", silent], 1, "did not answer"))
        for cmd, code, said in cases:
            proc = run(cmd, home)
            assert proc.returncode == code and said in proc.stderr, (cmd, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
