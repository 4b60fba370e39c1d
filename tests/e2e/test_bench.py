"""bench against the simulated host's vllm, a server `serve --detach` started: the sweep's figures per level
within 5% of the rate the stub streams at, the table, the heartbeat; and its bad input (a name not running, a
URL that does not answer, lengths above max_model_len, --concurrency 0), each one line."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Iterator, List

import pytest
from helpers.cli import clean_env
from helpers.serving import serving_venv

from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.model_dirs import build_model

BENCH = [sys.executable, "-m", "ascend_setup", "bench"]
RATE = re.compile(r"\[simulated\] decode rate ([\d.]+) tok/s")
KV = re.compile(r"\[simulated\] batch step \+([\d.]+) ms per context token of every running sequence")


def run(cmd: List[str], home: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(home, env), timeout=120)


def start(root: Path, *vllm: str, **env: str) -> Iterator[dict]:
    """A stub server from `serve --detach` (its rate and each context token's cost read from its log), stopped
    afterwards."""
    workdir, home_dir = root / "work", root / "home"
    home_dir.mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = run(
        [
            sys.executable,
            "-m",
            "ascend_setup",
            "serve",
            str(build_model(root / "models" / "dense", "dense")),
            "--venv",
            str(serving_venv(root / "venv")),
            "--workdir",
            str(workdir),
            "--cann-home",
            str(build_fake_cann(root / "A2").root),
            "--port",
            str(port),
            "--measure-tokens",
            "8",
            "--detach",
            "--json",
            *vllm,
        ],
        home_dir,
        **env,
    )
    assert proc.returncode == 0, proc.stderr
    log = (workdir / "serve" / "dense.log").read_text()
    rate, kv_ms = float(RATE.search(log).group(1)), float(KV.search(log).group(1))
    yield {
        "workdir": workdir,
        "rate": rate,
        "kv_ms": kv_ms,
        "url": f"http://127.0.0.1:{port}",
        "model": root / "models" / "dense",
    }
    run([sys.executable, "-m", "ascend_setup", "serve", "stop", "dense", "--workdir", str(workdir)], home_dir)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    yield from start(tmp_path_factory.mktemp("bench"))


@pytest.fixture(scope="module")
def eager_and_small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Eager mode, and a KV budget of 200 tokens: four sequences of 64 + 24 tokens do not fit."""
    yield from start(tmp_path_factory.mktemp("bench-eager"), "--", "--enforce-eager", VLLM_SIM_KV_TOKENS="200")


@pytest.fixture(scope="module")
def small_kv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Graph mode, and a KV budget of 600 tokens: four sequences of 64 + 8 tokens fit, sixteen do not."""
    yield from start(tmp_path_factory.mktemp("bench-small-kv"), VLLM_SIM_KV_TOKENS="600")


def preemptions(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return float(re.search(r"^vllm:num_preemptions_total\{[^}]*\} ([\d.]+)$", text, re.M).group(1))


def bench(served: dict, home: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return run([*BENCH, "dense", "--workdir", str(served["workdir"]), *extra], home, **env)


def test_a_sweep_gives_each_levels_figures_at_the_rate_the_stub_was_given(served: dict, home: Path) -> None:
    proc = bench(served, home, "--concurrency", "1,4,16", "--requests", "16", "--output-len", "24", "--json")
    assert proc.returncode == 0, proc.stderr
    levels = json.loads(proc.stdout)["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4, 16] and all(lv["requests"] == 16 for lv in levels)
    for lv in levels:
        # the stub's batch model: the weights once a step, the KV of every sequence at its context (128 + 24 / 2)
        per_user = 1 / (1 / served["rate"] + served["kv_ms"] / 1000 * lv["concurrency"] * (128 + 12))
        assert abs(1000 / lv["tpot_ms"] / per_user - 1) < 0.05, (lv, per_user)
        assert abs(1000 / lv["itl_ms"] / per_user - 1) < 0.05, (lv, per_user)
        assert 0 < lv["ttft_s"] < lv["e2el_s"] and lv["tpot_ms"] <= lv["tpot_p90_ms"]
    speeds = [1000 / lv["tpot_ms"] for lv in levels]
    assert levels[0]["output_tok_s"] < levels[1]["output_tok_s"] < levels[2]["output_tok_s"]  # throughput grows
    assert speeds[0] > speeds[2]  # and each user's speed falls (by 2% at 16: 140 tokens of KV against 16 GB)
    assert proc.stderr.count("bench: concurrency") == 6  # the heartbeat: each level's start and end
    assert json.loads(proc.stdout)["reasons"] == [] and all(lv["preemptions"] == 0 for lv in levels)  # quiet


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


def test_the_stub_batches_eager_5_7x_slower_and_preempts_past_its_kv_budget(
    served: dict, eager_and_small: dict, home: Path
) -> None:
    assert abs(served["rate"] / eager_and_small["rate"] - 5.7) < 0.01
    assert preemptions(eager_and_small["url"]) == 0
    one = bench(
        eager_and_small,
        home,
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--input-len",
        "64",
        "--output-len",
        "8",
        "--json",
    )
    assert one.returncode == 0 and preemptions(eager_and_small["url"]) == 0, one.stderr  # one sequence fits
    proc = bench(
        eager_and_small,
        home,
        "--concurrency",
        "4",
        "--requests",
        "4",
        "--input-len",
        "64",
        "--output-len",
        "8",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert preemptions(eager_and_small["url"]) > 0
    tpot = json.loads(one.stdout)["levels"][0]["tpot_ms"]
    assert abs(1000 / tpot / eager_and_small["rate"] - 1) < 0.05


def test_a_sweep_on_an_eager_server_names_eager_mode(eager_and_small: dict, home: Path) -> None:
    proc = bench(
        eager_and_small,
        home,
        "--concurrency",
        "1,4,16",
        "--requests",
        "16",
        "--input-len",
        "64",
        "--output-len",
        "8",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    found = {r["rule"]: r for r in json.loads(proc.stdout)["reasons"]}
    assert "--enforce-eager" in found["eager-mode"]["evidence"] and "graph mode" in found["eager-mode"]["fix"]
    table = bench(eager_and_small, home, "--concurrency", "1", "--requests", "1", "--output-len", "4")
    assert (
        table.returncode == 0 and "reason (eager-mode): the server was started with --enforce-eager" in table.stdout
    ), table.stdout


def test_a_kv_budget_too_small_for_16_names_preemptions_there_and_only_there(small_kv: dict, home: Path) -> None:
    proc = bench(
        small_kv,
        home,
        "--concurrency",
        "1,4,16",
        "--requests",
        "16",
        "--input-len",
        "64",
        "--output-len",
        "8",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [lv["preemptions"] for lv in result["levels"]][:2] == [0, 0] and result["levels"][2]["preemptions"] > 0
    assert [r["rule"] for r in result["reasons"]] == ["preemptions"]  # graph mode: no eager reason
    assert "at concurrency 16" in result["reasons"][0]["evidence"], result["reasons"]


def test_plot_writes_a_png_of_the_curve(served: dict, tmp_path: Path, home: Path) -> None:
    pytest.importorskip("matplotlib")
    picture = tmp_path / "curve.png"
    proc = bench(
        served,
        home,
        "--concurrency",
        "1,4,16",
        "--requests",
        "16",
        "--output-len",
        "24",
        "--json",
        "--plot",
        str(picture),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["plot"] == str(picture) and picture.read_bytes().startswith(b"\x89PNG")


def test_the_verdict_is_as_predicted_against_fit_and_the_next_sweep_has_this_ones_calibration(
    served: dict, home: Path
) -> None:
    """The stub streams at the rate of the simulated 910B3 and the model's bytes, as fit's batch model predicts
    for that card, model and TP (serve's record and result say which): each level is 'as predicted' against fit,
    named; the sweep is saved, and the next one is judged against it too."""
    args = ("--concurrency", "1,4,16", "--requests", "16", "--output-len", "24", "--json")
    first = bench(served, home, *args)
    assert first.returncode == 0, first.stderr
    judged = json.loads(first.stdout)["verdicts"]
    assert [v["concurrency"] for v in judged] == [1, 4, 16]
    for v in judged:
        assert v["verdict"] == "as predicted" and v["against"] == "fit" and v["reasons"] == [], v
        fit = v["references"][0]
        assert fit["reference"] == "fit" and "910B3" in fit["what"] and "a2-graph" in fit["what"], fit
        assert abs(fit["ratio"] - 1) < 0.05, fit  # the stub's model and fit's agree to a few %
    assert all(v["references"][-1]["reference"] == "calibration" for v in judged)
    second = bench(served, home, *args)
    assert second.returncode == 0, second.stderr
    calibration = [v["references"][-1] for v in json.loads(second.stdout)["verdicts"]]
    assert all(c["tpot_ms"] and c["verdict"] == "as predicted" for c in calibration), calibration
    table = bench(served, home, "--concurrency", "4", "--requests", "4", "--output-len", "8", COLUMNS="80")
    said = " ".join(table.stdout.split())  # prose wraps at 80 columns
    assert table.returncode == 0 and max(len(line) for line in table.stdout.splitlines()) <= 80, table.stdout
    assert "verdict: concurrency 4: as predicted against fit" in said, table.stdout
    assert "reference fit: fit's batch decode model for dense on an 910B3 (a2-graph" in said, table.stdout


def test_a_url_server_gets_fits_verdict_when_told_its_model_and_card_and_its_own_calibration(
    served: dict, tmp_path: Path, home: Path
) -> None:
    """--url with --model-dir, --card (and --tp): the same fit verdict a NAME gets; its sweeps are saved in the
    workdir and the next sweep of the same URL and model is judged against them. Without them: no fit figure."""
    workdir = tmp_path / "wd"
    workdir.mkdir()
    args = [
        *BENCH,
        "--url",
        served["url"],
        "--concurrency",
        "1,4",
        "--requests",
        "4",
        "--output-len",
        "16",
        "--json",
        "--workdir",
        str(workdir),
    ]
    bare = run(args, home)
    assert bare.returncode == 0, bare.stderr
    fit = json.loads(bare.stdout)["verdicts"][0]["references"][0]
    assert fit["tpot_ms"] is None and "--model-dir" in fit["what"], fit
    told = run([*args, "--model-dir", str(served["model"]), "--card", "910B3", "--tp", "1"], home)
    assert told.returncode == 0, told.stderr
    for v in json.loads(told.stdout)["verdicts"]:
        assert v["verdict"] == "as predicted" and v["against"] == "fit", v
        assert abs(v["references"][0]["ratio"] - 1) < 0.05, v
        calibration = v["references"][-1]
        assert calibration["reference"] == "calibration" and calibration["verdict"] == "as predicted", calibration
    assert len(list((workdir / "bench").glob("*.json"))) == 2


def test_an_eager_server_is_slower_than_predicted_and_says_why(eager_and_small: dict, home: Path) -> None:
    proc = bench(
        eager_and_small,
        home,
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--input-len",
        "64",
        "--output-len",
        "8",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    (v,) = json.loads(proc.stdout)["verdicts"]
    assert v["verdict"] == "slower than predicted" and v["against"] == "fit", v
    assert v["references"][0]["ratio"] < 0.3 and any(r.startswith("eager-mode") for r in v["reasons"]), v


#: `vllm bench serve` as the test's stub: its arguments read as vLLM 0.23.0's are, and its --save-result JSON in
#: the real shape (vllm/benchmarks/serve.py's result_json), with figures that follow the concurrency and its
#: own command line kept in it, for the test to read.
STUB_BENCH = r'''
import argparse, json, os, sys
p = argparse.ArgumentParser()
for flag in ("--backend", "--base-url", "--endpoint", "--model", "--served-model-name", "--tokenizer",
             "--dataset-name", "--random-input-len", "--random-prefix-len", "--random-output-len", "--num-prompts",
             "--max-concurrency", "--request-rate", "--seed", "--percentile-metrics", "--metric-percentiles",
             "--ready-check-timeout-sec", "--result-dir", "--result-filename"):
    p.add_argument(flag)
p.add_argument("--save-result", action="store_true")
p.add_argument("--disable-tqdm", action="store_true")
a = p.parse_args(sys.argv[3:])
c, n, out = int(a.max_concurrency), int(a.num_prompts), int(a.random_output_len)
tpot = 10.0 + c
result = {"backend": a.backend, "max_concurrency": c, "num_prompts": n, "duration": n * out * tpot / 1000 / c,
          "completed": n, "failed": 0, "request_throughput": c * 1000 / (out * tpot),
          "output_throughput": c * 1000 / tpot, "median_ttft_ms": 50.0, "p90_ttft_ms": 60.0,
          "median_tpot_ms": tpot, "p90_tpot_ms": tpot + 1, "median_itl_ms": tpot, "p90_itl_ms": tpot + 2,
          "median_e2el_ms": 50.0 + tpot * (out - 1), "p90_e2el_ms": 70.0 + tpot * (out - 1), "argv": sys.argv[1:],
          "env": os.environ.get("ASCEND_RT_VISIBLE_DEVICES")}
print("============ Serving Benchmark Result ============")
json.dump(result, open(os.path.join(a.result_dir, a.result_filename), "w"))
'''


@pytest.fixture(scope="module")
def with_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A served stub whose venv also has a `vllm bench serve` (the stub above) and whose model a tokenizer."""
    root = tmp_path_factory.mktemp("bench-vllm")
    for served in start(root):
        venv = root / "venv" / "venv"
        (site,) = venv.glob("lib/python3*/site-packages")
        (site / "vllm" / "benchmarks").mkdir()
        (site / "vllm" / "benchmarks" / "serve.py").write_text(STUB_BENCH)
        (root / "models" / "dense" / "tokenizer.json").write_text("{}")
        real = venv / "bin" / "vllm"
        real.rename(venv / "bin" / "vllm.serve")
        real.write_text(
            f'#!/bin/sh\nif [ "$1" = bench ]; then exec {venv / "bin" / "python"} '
            f'{site / "vllm" / "benchmarks" / "serve.py"} "$@"; fi\nexec {venv / "bin" / "vllm.serve"} '
            '"$@"\n'
        )
        real.chmod(0o755)
        yield served


def test_where_the_venv_has_vllm_bench_serve_each_level_is_its_json(with_benchmark: dict, home: Path) -> None:
    proc = bench(with_benchmark, home, "--concurrency", "1,4", "--requests", "8", "--output-len", "24", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["client"].startswith("vllm bench serve (vLLM ")
    for lv, c in zip(result["levels"], (1, 4)):
        tpot = 10.0 + c  # the stub's figures, read back
        assert (lv["concurrency"], lv["requests"], lv["tpot_ms"], lv["tpot_p90_ms"], lv["itl_p90_ms"]) == (
            c,
            8,
            tpot,
            tpot + 1,
            tpot + 2,
        )
        assert lv["output_tok_s"] == round(c * 1000 / tpot, 2) and lv["ttft_s"] == 0.05
    assert proc.stderr.count("bench: concurrency") == 4
    own = bench(
        with_benchmark, home, "--concurrency", "2", "--requests", "2", "--output-len", "8", "--json", "--client", "own"
    )
    assert own.returncode == 0 and json.loads(own.stdout)["client"] == "ascend-setup's client", own.stderr
    table = bench(with_benchmark, home, "--concurrency", "2", "--requests", "2", "--output-len", "8")
    assert table.returncode == 0 and "vllm bench serve (vLLM" in table.stdout, table.stdout


def test_client_vllm_without_the_benchmark_is_one_line(served: dict, home: Path) -> None:
    proc = bench(served, home, "--client", "vllm")
    assert proc.returncode == 2 and "no vLLM benchmark" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
