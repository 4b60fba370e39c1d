"""Answer "is N tok/s normal?": three timed, streamed completions with `ignore_eos` (every run decodes the same
number of tokens), TTFT and decode tok/s = (tokens - 1) / (t_last - t_first) from the server's own `usage`
(robust to chunks that bundle tokens), the median of three, beside fit's prediction."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from ascend_setup.serve.smoke import REQUEST_TIMEOUT, RequestFailed, stream
from ascend_setup.utils.files import atomic_write_text, make_dir

RUNS = 3
MAX_TOKENS = 256
PROMPT = "Write a long story about the sea. " * 16


@dataclass
class Run:
    ttft_s: float
    tokens: int
    tok_s: float


@dataclass
class Measurement:
    ttft_s: float  # median
    tok_s: float  # median
    runs: List[Run] = field(default_factory=list)


def timed_completion(base: str, name: str, max_tokens: int) -> Run:
    body = {"model": name, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    sent = time.perf_counter()
    first = last = None
    tokens = 0
    for arrived, event in stream(f"{base}/v1/completions", body, REQUEST_TIMEOUT):
        if any(c.get("text") for c in event.get("choices") or []):
            first = first if first is not None else arrived
            last = arrived
        usage = event.get("usage")
        if isinstance(usage, dict) and usage.get("completion_tokens"):
            tokens = int(usage["completion_tokens"])
    if first is None or last is None or tokens < 2 or last <= first:
        raise RequestFailed(f"the streamed completion gave {tokens} token(s): nothing to time")
    return Run(round(first - sent, 4), tokens, round((tokens - 1) / (last - first), 2))


def measure(base: str, name: str, runs: int = RUNS, max_tokens: int = MAX_TOKENS) -> Measurement:
    done = [timed_completion(base, name, max_tokens) for _ in range(runs)]
    return Measurement(round(statistics.median(r.ttft_s for r in done), 4),
                       round(statistics.median(r.tok_s for r in done), 2), done)


def write_result(path: Path, *, card: str, cann: str, tp: int, graph_mode: bool, model: str, bytes_per_token: int,
                 measurement: Measurement, predicted: Optional[float], plan: Dict[str, Any],
                 versions: Dict[str, Optional[str]], simulated: bool) -> Dict[str, Any]:
    """`<workdir>/serve/<name>.json`: the figures and everything they depend on (fit's calibration reads it)."""
    result = {"card": card, "cann": cann, "tp": tp, "graph_mode": graph_mode, "model": model,
              "bytes_per_token": bytes_per_token, "tok_s": measurement.tok_s, "ttft_s": measurement.ttft_s,
              "runs": [asdict(r) for r in measurement.runs], "predicted_tok_s": predicted,
              "ratio": round(measurement.tok_s / predicted, 3) if predicted else None,
              "command": plan["argv"], "environment": plan["environment"], "versions": versions,
              "simulated": simulated, "measured_at": time.time()}
    make_dir(path.parent)
    atomic_write_text(path, json.dumps(result, indent=2) + "\n")
    return result
