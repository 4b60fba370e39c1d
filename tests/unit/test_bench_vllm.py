"""bench's reading of the real `vllm bench serve`: where it is found (the server venv's vLLM with its benchmark, a
model directory with a tokenizer), the command of a level, and its saved JSON (the shape vLLM 0.23.0's
vllm/benchmarks/serve.py writes; the figures below are one run of it against the stub) as the sweep's Level."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_setup.bench import vllm_bench
from ascend_setup.errors import AscendSetupError

#: vLLM 0.23.0's `vllm bench serve --save-result` at --max-concurrency 4 against the stub (the per-request lists
#: are left out without --save-detailed).
REAL = {
    "date": "20261207-153950",
    "endpoint_type": "vllm",
    "backend": "vllm",
    "label": None,
    "model_id": "/tmp/b51/srv/models/dense",
    "tokenizer_id": "/tmp/b51/tok",
    "num_prompts": 16,
    "request_rate": "inf",
    "burstiness": 1.0,
    "max_concurrency": 4,
    "duration": 2.3588400640001055,
    "completed": 16,
    "failed": 0,
    "total_input_tokens": 1024,
    "total_output_tokens": 384,
    "request_throughput": 6.782994847419754,
    "request_goodput": None,
    "output_throughput": 162.7918763380741,
    "total_token_throughput": 596.9035465729385,
    "max_output_tokens_per_s": 156.0,
    "max_concurrent_requests": 12,
    "rtfx": 0.0,
    "mean_ttft_ms": 150.78852018747568,
    "median_ttft_ms": 150.18183600000157,
    "std_ttft_ms": 2.257551895983989,
    "p50_ttft_ms": 150.18183600000157,
    "p90_ttft_ms": 153.88125000004038,
    "mean_tpot_ms": 19.006026269022787,
    "median_tpot_ms": 19.002047673913456,
    "std_tpot_ms": 0.011837672041309163,
    "p50_tpot_ms": 19.002047673913456,
    "p90_tpot_ms": 19.023787130436176,
    "mean_itl_ms": 19.00603573369608,
    "median_itl_ms": 18.999023999981546,
    "std_itl_ms": 0.47571740874198976,
    "p50_itl_ms": 18.999023999981546,
    "p90_itl_ms": 19.15605119997963,
    "mean_e2el_ms": 587.9271243749997,
    "median_e2el_ms": 587.3142760000292,
    "std_e2el_ms": 2.3634972923106274,
    "p50_e2el_ms": 587.3142760000292,
    "p90_e2el_ms": 591.2153510000735,
}


def test_its_saved_json_is_the_sweeps_level() -> None:
    level = vllm_bench.level_of(REAL, 4)
    assert (level.concurrency, level.requests, level.duration_s) == (4, 16, 2.359)
    assert (level.output_tok_s, level.request_s) == (162.79, 6.783)
    m = level.measurement
    assert (m.ttft_s, m.tpot_ms, m.tpot_p90_ms, m.itl_ms, m.itl_p90_ms, m.e2el_s) == (
        0.1502,
        19.002,
        19.024,
        18.999,
        19.156,
        0.5873,
    )
    assert m.tok_s == round(1000 / REAL["median_tpot_ms"], 2)
    assert level.row()["tpot_ms"] == 19.002 and "runs" not in level.row()


def test_failed_requests_or_a_missing_figure_are_an_error() -> None:
    with pytest.raises(AscendSetupError, match="2 of 16 requests failed"):
        vllm_bench.level_of({**REAL, "completed": 14, "failed": 2}, 4)
    with pytest.raises(AscendSetupError, match="no number 'p90_tpot_ms'"):
        vllm_bench.level_of({k: v for k, v in REAL.items() if k != "p90_tpot_ms"}, 4)


def venv(root: Path, *, benchmark: bool = True, tokenizer: bool = True) -> list:
    site = root / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "vllm" / "benchmarks").mkdir(parents=True)
    if benchmark:
        (site / "vllm" / "benchmarks" / "serve.py").write_text("")
    (site / "vllm-0.23.0.dist-info").mkdir()
    (site / "vllm-0.23.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.23.0\n")
    (root / "venv" / "bin").mkdir()
    (root / "venv" / "bin" / "vllm").write_text("#!/bin/sh\n")
    (root / "model").mkdir()
    if tokenizer:
        (root / "model" / "tokenizer.json").write_text("{}")
    return [str(root / "venv" / "bin" / "vllm"), "serve", str(root / "model"), "--port", "8000"]


def test_found_where_the_servers_venv_has_the_benchmark_and_its_model_a_tokenizer(tmp_path: Path) -> None:
    found = vllm_bench.find(venv(tmp_path), {"ASCEND_RT_VISIBLE_DEVICES": "0"})
    assert found is not None and found.version == "0.23.0" and found.label == "vllm bench serve (vLLM 0.23.0)"
    assert found.vllm == tmp_path / "venv" / "bin" / "vllm" and found.tokenizer == tmp_path / "model"
    assert found.env == {"ASCEND_RT_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("missing", ["benchmark", "tokenizer"])
def test_not_found_without_the_benchmark_or_a_tokenizer(tmp_path: Path, missing: str) -> None:
    assert vllm_bench.find(venv(tmp_path, **{missing: False}), {}) is None
    assert vllm_bench.find(["vllm"], {}) is None


def test_a_levels_command(tmp_path: Path) -> None:
    found = vllm_bench.find(venv(tmp_path), {})
    assert found is not None
    result = tmp_path / "out" / "c8.json"
    argv = vllm_bench.command(found, "http://127.0.0.1:9", "dense", 8, 4, 128, 64, False, result, 7)
    assert argv[:3] == [str(found.vllm), "bench", "serve"]

    def value(flag: str, words: list = argv) -> str:
        return words[words.index(flag) + 1]

    assert (value("--max-concurrency"), value("--num-prompts"), value("--seed")) == ("8", "8", "7")
    assert (value("--random-input-len"), value("--random-prefix-len"), value("--random-output-len")) == (
        "128",
        "0",
        "64",
    )
    assert (value("--served-model-name"), value("--tokenizer"), value("--base-url")) == (
        "dense",
        str(tmp_path / "model"),
        "http://127.0.0.1:9",
    )
    assert (value("--result-dir"), value("--result-filename")) == (str(result.parent), "c8.json")
    assert "--save-result" in argv and value("--metric-percentiles") == "50,90"
    cached = vllm_bench.command(found, "http://127.0.0.1:9", "dense", 8, 4, 128, 64, True, result, 7)
    assert (value("--random-input-len", cached), value("--random-prefix-len", cached)) == ("16", "112")
