"""The real `vllm bench serve`, where the server's own venv has it: each level is one run of it (random dataset,
`--max-concurrency`, `--save-result`) and its JSON is read into the sweep's Level, so the figures are the ones
users publish. Found without importing vLLM (which takes seconds): the venv of the server's `vllm` executable,
its `vllm` package holding `benchmarks/serve.py`, and a model directory with a tokenizer (the random dataset
draws token ids from it, and vLLM's benchmark reports TTFT, TPOT and ITL only with one). Otherwise the sweep uses
its own client, with the same definitions."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ascend_setup.bench.sweep import Level
from ascend_setup.errors import AscendSetupError
from ascend_setup.serve import server_records as records
from ascend_setup.serve.measure import Measurement

#: Files any of which makes a model directory's tokenizer loadable by transformers' AutoTokenizer.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
#: How long vLLM's benchmark may take to import and start before its first request (seconds).
START_ALLOWANCE_S = 300.0
#: The percentiles read back: medians, and p90 for TPOT and ITL as the own client reports them.
PERCENTILE_METRICS = "ttft,tpot,itl,e2el"
PERCENTILES = "50,90"


@dataclass
class VllmBench:
    vllm: Path  # the server venv's `vllm` executable, the one serve started it with
    version: str  # vLLM's, from its dist-info
    tokenizer: Path  # the model directory the server was started on
    env: Dict[str, str]  # the server's own environment additions (CANN's, the plugin's)

    @property
    def label(self) -> str:
        return f"vllm bench serve (vLLM {self.version})"


def _site_vllm(venv: Path) -> Optional[Path]:
    for lib in sorted(venv.glob("lib*/python3*/site-packages")):
        if (lib / "vllm" / "benchmarks" / "serve.py").is_file():
            return lib
    return None


def _version(site: Path) -> str:
    for info in sorted(site.glob("vllm-*.dist-info")):
        for line in (info / "METADATA").read_text(errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def find(argv: List[str], env: Mapping[str, str]) -> Optional[VllmBench]:
    """The real benchmark for a server started as `argv` (serve's record: [<venv>/bin/vllm, 'serve', MODEL, ...]),
    or None when its venv has no vLLM benchmark or its model directory no tokenizer."""
    if len(argv) < 3 or argv[1] != "serve":
        return None
    vllm, model = Path(argv[0]), Path(argv[2])
    site = _site_vllm(vllm.parent.parent)
    if site is None or not vllm.is_file() or not model.is_dir():
        return None
    if not any((model / name).is_file() for name in TOKENIZER_FILES):
        return None
    return VllmBench(vllm, _version(site), model, dict(env))


def for_record(workdir: Path, name: str) -> Optional[VllmBench]:
    """The real benchmark for the server `serve` recorded as `name` (from_record has checked that it runs)."""
    record = records.load(records.record_path(workdir, name))
    return find(list(record.argv), record.env)


def command(
    bench: VllmBench,
    base: str,
    model: str,
    concurrency: int,
    requests: int,
    input_len: int,
    output_len: int,
    prefix_cache: bool,
    result: Path,
    seed: int,
) -> List[str]:
    """One level's `vllm bench serve`: `requests` random prompts (a fresh seed a level, so no prompt repeats an
    earlier level's), `concurrency` at a time; under --prefix-cache all but 16 of the input tokens are one shared
    prefix."""
    shared = max(0, input_len - 16) if prefix_cache else 0
    return [
        str(bench.vllm),
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        base,
        "--endpoint",
        "/v1/completions",
        "--model",
        str(bench.tokenizer),
        "--served-model-name",
        model,
        "--tokenizer",
        str(bench.tokenizer),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len - shared),
        "--random-prefix-len",
        str(shared),
        "--random-output-len",
        str(output_len),
        "--num-prompts",
        str(max(requests, concurrency)),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--seed",
        str(seed),
        "--percentile-metrics",
        PERCENTILE_METRICS,
        "--metric-percentiles",
        PERCENTILES,
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(result.parent),
        "--result-filename",
        result.name,
    ]


def _number(data: Dict[str, Any], key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AscendSetupError(
            f"vllm bench serve's result has no number {key!r}",
            hint="a vLLM whose benchmark writes other keys: run with --client own",
        )
    return float(value)


def level_of(data: Dict[str, Any], concurrency: int) -> Level:
    """vllm bench serve's saved result (vllm/benchmarks/serve.py's result_json) as the sweep's Level."""
    completed, failed = int(_number(data, "completed")), int(data.get("failed") or 0)
    if failed or completed < 1:
        raise AscendSetupError(
            f"vllm bench serve at concurrency {concurrency}: {failed} of {completed + failed} requests failed"
        )
    tpot = _number(data, "median_tpot_ms")
    measurement = Measurement(
        ttft_s=round(_number(data, "median_ttft_ms") / 1000, 4),
        tok_s=round(1000 / tpot, 2) if tpot else 0.0,
        tpot_ms=round(tpot, 3),
        tpot_p90_ms=round(_number(data, "p90_tpot_ms"), 3),
        itl_ms=round(_number(data, "median_itl_ms"), 3),
        itl_p90_ms=round(_number(data, "p90_itl_ms"), 3),
        e2el_s=round(_number(data, "median_e2el_ms") / 1000, 4),
    )
    return Level(
        concurrency,
        completed,
        round(_number(data, "duration"), 3),
        round(_number(data, "output_throughput"), 2),
        round(_number(data, "request_throughput"), 3),
        measurement,
    )


def run_level(
    bench: VllmBench,
    base: str,
    model: str,
    concurrency: int,
    requests: int,
    input_len: int,
    output_len: int,
    prefix_cache: bool,
    budget_s: float,
) -> Level:
    """One level by vLLM's benchmark; its output goes to a log that an error's hint names."""
    folder = Path(tempfile.mkdtemp(prefix="ascend-setup-bench-"))
    result, log = folder / f"c{concurrency}.json", folder / f"c{concurrency}.log"
    argv = command(
        bench,
        base,
        model,
        concurrency,
        requests,
        input_len,
        output_len,
        prefix_cache,
        result,
        random.randrange(1 << 30),
    )
    env = {**os.environ, **bench.env, "PYTHONUNBUFFERED": "1"}
    try:
        with log.open("w") as out:
            code = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=START_ALLOWANCE_S + 4 * budget_s,
            ).returncode
    except subprocess.TimeoutExpired:
        raise AscendSetupError(
            f"vllm bench serve at concurrency {concurrency} did not finish within "
            f"{START_ALLOWANCE_S + 4 * budget_s:g} s",
            hint=f"its output is in {log}",
        ) from None
    if code != 0 or not result.is_file():
        tail = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise AscendSetupError(
            f"vllm bench serve at concurrency {concurrency} failed (exit {code}): {tail}",
            hint=f"its output is in {log}; --client own measures without it",
        )
    try:
        data = json.loads(result.read_text())
    except ValueError as exc:
        raise AscendSetupError(f"vllm bench serve's result {result} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AscendSetupError(f"vllm bench serve's result {result} is not a JSON object")
    level = level_of(data, concurrency)
    shutil.rmtree(folder, ignore_errors=True)
    return level
