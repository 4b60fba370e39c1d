"""Answer "is N tok/s normal?" in `vllm bench serve`'s terms: three timed, streamed completions with `ignore_eos`
(every run decodes the same number of tokens), each behind a fresh random prefix, so prefix caching (on by
default; Ascend's block is 128 tokens) cannot turn the prefill into a cache hit. Per request, as vLLM 0.23.0's
benchmark (vllm/benchmarks/lib/endpoint_request_func.py) defines them, over the chunks that carry a choice (its
text may be empty, as for a token that ends no character; the `usage` chunk and `[DONE]` carry none): TTFT (the
first such chunk), ITL (the gaps between them), E2EL (request start to the last of them), TPOT ((E2EL - TTFT) /
(tokens - 1)); decode tok/s = 1000 / TPOT, from the server's own `usage` count (robust to chunks that bundle
tokens). Reported as medians, TPOT and ITL also at p90, beside fit's prediction."""

from __future__ import annotations

import json
import secrets
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ascend_setup.serve.smoke import REQUEST_TIMEOUT, RequestFailed, stream
from ascend_setup.utils.files import atomic_write_text, make_dir

RUNS = 3
MAX_TOKENS = 256
PROMPT = "Write a long story about the sea. " * 16


def fresh_prompt(body: str = PROMPT) -> str:
    """`body` behind 16 random words: its first KV block is new to the server every time."""
    return " ".join(secrets.token_hex(4) for _ in range(16)) + " " + body


def percentile(values: Sequence[float], share: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default, which `vllm bench serve` uses)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * share
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Run:
    ttft_s: float
    tokens: int
    tok_s: float
    tpot_ms: float
    e2el_s: float
    itl_ms: List[float] = field(default_factory=list)


@dataclass
class Measurement:
    ttft_s: float  # median
    tok_s: float  # median
    tpot_ms: float = 0.0  # median
    tpot_p90_ms: float = 0.0
    itl_ms: float = 0.0  # median over every gap of every run
    itl_p90_ms: float = 0.0
    e2el_s: float = 0.0  # median
    runs: List[Run] = field(default_factory=list)


def timed_completion(base: str, name: str, max_tokens: int, prompt: Optional[str] = None) -> Run:
    """One streamed request; `prompt` (bench's, of a chosen length) or PROMPT behind a fresh prefix."""
    body = {
        "model": name,
        "prompt": prompt or fresh_prompt(),
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    sent = time.perf_counter()
    arrivals: List[float] = []
    tokens = 0
    for arrived, event in stream(f"{base}/v1/completions", body, REQUEST_TIMEOUT):
        if event.get("choices"):  # vLLM's benchmark times every chunk with a choice, its text empty or not
            arrivals.append(arrived)
        usage = event.get("usage")
        if isinstance(usage, dict) and usage.get("completion_tokens"):
            tokens = int(usage["completion_tokens"])
    if len(arrivals) < 2 or tokens < 2:
        raise RequestFailed(
            f"the streamed completion gave {tokens} token(s) in {len(arrivals)} chunk(s): nothing to time"
        )
    ttft, latency = arrivals[0] - sent, arrivals[-1] - sent  # E2EL ends at the last token, not at [DONE]
    tpot = (latency - ttft) / (tokens - 1)
    gaps = [round((b - a) * 1000, 3) for a, b in zip(arrivals, arrivals[1:])]
    return Run(round(ttft, 4), tokens, round(1 / tpot, 2), round(tpot * 1000, 3), round(latency, 4), gaps)


def measure(base: str, name: str, runs: int = RUNS, max_tokens: int = MAX_TOKENS) -> Measurement:
    return summarise([timed_completion(base, name, max_tokens) for _ in range(runs)])


def summarise(done: List[Run]) -> Measurement:
    """Medians (TPOT and ITL also at p90) over runs, as `vllm bench serve` reports them."""
    gaps = [g for r in done for g in r.itl_ms] or [0.0]
    tpots = [r.tpot_ms for r in done]
    return Measurement(
        ttft_s=round(statistics.median(r.ttft_s for r in done), 4),
        tok_s=round(statistics.median(r.tok_s for r in done), 2),
        tpot_ms=round(statistics.median(tpots), 3),
        tpot_p90_ms=round(percentile(tpots, 0.9), 3),
        itl_ms=round(statistics.median(gaps), 3),
        itl_p90_ms=round(percentile(gaps, 0.9), 3),
        e2el_s=round(statistics.median(r.e2el_s for r in done), 4),
        runs=done,
    )


def write_result(
    path: Path,
    *,
    card: str,
    cann: str,
    tp: int,
    graph_mode: bool,
    model: str,
    bytes_per_token: int,
    measurement: Measurement,
    predicted: Optional[float],
    plan: Dict[str, Any],
    versions: Dict[str, Optional[str]],
    simulated: bool,
) -> Dict[str, Any]:
    """`<workdir>/serve/<name>.json`: the figures and everything they depend on (fit's calibration reads it)."""
    result = {
        "card": card,
        "cann": cann,
        "tp": tp,
        "graph_mode": graph_mode,
        "model": model,
        "bytes_per_token": bytes_per_token,
        "tok_s": measurement.tok_s,
        "ttft_s": measurement.ttft_s,
        "tpot_ms": measurement.tpot_ms,
        "tpot_p90_ms": measurement.tpot_p90_ms,
        "itl_ms": measurement.itl_ms,
        "itl_p90_ms": measurement.itl_p90_ms,
        "e2el_s": measurement.e2el_s,
        "runs": [asdict(r) for r in measurement.runs],
        "predicted_tok_s": predicted,
        "ratio": round(measurement.tok_s / predicted, 3) if predicted else None,
        "command": plan["argv"],
        "environment": plan["environment"],
        "versions": versions,
        "simulated": simulated,
        "measured_at": time.time(),
    }
    make_dir(path.parent)
    atomic_write_text(path, json.dumps(result, indent=2) + "\n")
    return result
