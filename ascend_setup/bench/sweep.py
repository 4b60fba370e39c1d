"""The sweep: at each concurrency, a bounded number of streamed requests (serve/measure's client, run by that
many threads at once), each behind a fresh random prefix unless prefix caching is asked for; per level the
medians and p90s of `vllm bench serve`'s definitions, output throughput (tokens / wall time of the level) and
request throughput. Doubling stops when throughput grows by under 5% or TPOT passes the SLO."""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional

from ascend_setup.errors import AscendSetupError
from ascend_setup.serve.measure import Measurement, Run, fresh_prompt, summarise, timed_completion
from ascend_setup.serve.smoke import RequestFailed

#: Throughput must grow by this share from one doubling to the next for the sweep to go on.
MIN_GAIN = 0.05
MAX_LEVEL = 1024


@dataclass
class Level:
    concurrency: int
    requests: int
    duration_s: float
    output_tok_s: float
    request_s: float
    measurement: Measurement
    preemptions: Optional[float] = None  # how much vllm:num_preemptions_total grew during the level

    def row(self) -> Dict[str, Any]:
        m = asdict(self.measurement)
        m.pop("runs")
        return {"concurrency": self.concurrency, "requests": self.requests, "duration_s": self.duration_s,
                "output_tok_s": self.output_tok_s, "request_s": self.request_s,
                "preemptions": self.preemptions, **m}


def prompt_of(input_len: int, prefix_cache: bool, shared: str) -> str:
    """About `input_len` tokens (a word of filler is about one token): behind a fresh random prefix, or behind
    the sweep's one shared prefix under --prefix-cache (then every request after the first hits the cache)."""
    filler = " ".join(["sea"] * max(1, input_len - 16))
    return (shared + " " + filler) if prefix_cache else fresh_prompt(filler)


def run_level(base: str, model: str, concurrency: int, requests: int, input_len: int, output_len: int,
              prefix_cache: bool, budget_s: float) -> Level:
    """`requests` requests, `concurrency` at a time; none starts after `budget_s` (at least one round runs)."""
    shared = " ".join(secrets.token_hex(4) for _ in range(16))
    start = time.perf_counter()

    def one(_: int) -> Optional[Run]:
        if time.perf_counter() - start > budget_s:
            return None
        return timed_completion(base, model, output_len, prompt_of(input_len, prefix_cache, shared))

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            done = [r for r in pool.map(one, range(max(requests, concurrency))) if r is not None]
    except RequestFailed as exc:
        raise AscendSetupError(f"a request at concurrency {concurrency} failed: {exc}") from None
    wall = time.perf_counter() - start
    return Level(concurrency, len(done), round(wall, 3), round(sum(r.tokens for r in done) / wall, 2),
                 round(len(done) / wall, 3), summarise(done))


def levels(given: Optional[List[int]]) -> List[int]:
    return given if given else [1 << i for i in range(11) if 1 << i <= MAX_LEVEL]


def sweep(base: str, model: str, *, concurrency: Optional[List[int]], requests: int, input_len: int,
          output_len: int, prefix_cache: bool, budget_s: float, slo_tpot_ms: Optional[float],
          progress: Callable[[str], None],
          preemptions: Optional[Callable[[], Optional[float]]] = None,
          runner: Optional[Callable[..., Level]] = None) -> List[Level]:
    """Each level of `concurrency`, or doubling from 1 until throughput stops growing or TPOT passes the SLO;
    `preemptions` reads the server's preemption counter, before and after each level; `runner` measures a level
    (run_level's arguments; default: the own client, run_level)."""
    measure = runner or run_level
    done: List[Level] = []
    for c in levels(concurrency):
        progress(f"concurrency {c}: {max(requests, c)} requests ...")
        before = preemptions() if preemptions else None
        level = measure(base, model, c, requests, input_len, output_len, prefix_cache, budget_s)
        after = preemptions() if preemptions else None
        if before is not None and after is not None:
            level.preemptions = after - before
        progress(f"concurrency {c}: {level.output_tok_s:g} tok/s, TPOT {level.measurement.tpot_ms:g} ms "
                 f"({level.requests} requests in {level.duration_s:g} s)")
        done.append(level)
        if concurrency:
            continue
        if slo_tpot_ms is not None and level.measurement.tpot_ms > slo_tpot_ms:
            progress(f"stopped: TPOT {level.measurement.tpot_ms:g} ms passes the SLO {slo_tpot_ms:g} ms")
            break
        if len(done) > 1 and level.output_tok_s < done[-2].output_tok_s * (1 + MIN_GAIN):
            progress(f"stopped: throughput grew under {MIN_GAIN:.0%} from concurrency {done[-2].concurrency}")
            break
    return done
