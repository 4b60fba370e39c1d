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

from ascend_setup.bench.reasons import PREFIX_HITS, PREFIX_QUERIES, WAITING, Watch
from ascend_setup.errors import AscendSetupError
from ascend_setup.serve.measure import Measurement, Run, fresh_prompt, summarise, timed_completion
from ascend_setup.serve.smoke import RequestFailed

#: Throughput must grow by this share from one doubling to the next for the sweep to go on.
MIN_GAIN = 0.05
MAX_LEVEL = 1024
PREEMPTIONS = "vllm:num_preemptions_total"
#: npu-smi is read this often for the clocks during a level (a run of it takes a fraction of a second).
CLOCK_EVERY = 1.0


@dataclass
class Level:
    concurrency: int
    requests: int
    duration_s: float
    output_tok_s: float
    request_s: float
    measurement: Measurement
    preemptions: Optional[float] = None  # how much vllm:num_preemptions_total grew during the level
    prefix_cache_hits: Optional[float] = None  # how much vllm:prefix_cache_hits_total grew (prompt tokens)
    prefix_cache_queries: Optional[float] = None  # how much vllm:prefix_cache_queries_total grew (prompt tokens)
    waiting: Optional[float] = None  # the most vllm:num_requests_waiting read during the level
    clocks: Optional[Dict[str, float]] = None  # the most of each card's AI Core clock fields read (reasons.py)

    def row(self) -> Dict[str, Any]:
        m = asdict(self.measurement)
        m.pop("runs")
        return {
            "concurrency": self.concurrency,
            "requests": self.requests,
            "duration_s": self.duration_s,
            "output_tok_s": self.output_tok_s,
            "request_s": self.request_s,
            "preemptions": self.preemptions,
            "prefix_cache_hits": self.prefix_cache_hits,
            "prefix_cache_queries": self.prefix_cache_queries,
            "waiting": self.waiting,
            **m,
        }


def prompt_of(input_len: int, prefix_cache: bool, shared: str) -> str:
    """About `input_len` tokens (a word of filler is about one token): behind a fresh random prefix, or behind
    the sweep's one shared prefix under --prefix-cache (then every request after the first hits the cache)."""
    filler = " ".join(["sea"] * max(1, input_len - 16))
    return (shared + " " + filler) if prefix_cache else fresh_prompt(filler)


def run_level(
    base: str,
    model: str,
    concurrency: int,
    requests: int,
    input_len: int,
    output_len: int,
    prefix_cache: bool,
    budget_s: float,
) -> Level:
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
    return Level(
        concurrency,
        len(done),
        round(wall, 3),
        round(sum(r.tokens for r in done) / wall, 2),
        round(len(done) / wall, 3),
        summarise(done),
    )


def grown(before: Optional[Dict[str, float]], after: Optional[Dict[str, float]], name: str) -> Optional[float]:
    """How much the counter `name` grew between two reads of /metrics (None: either read lacks it)."""
    if before is None or after is None or name not in before or name not in after:
        return None
    return after[name] - before[name]


def levels(given: Optional[List[int]]) -> List[int]:
    return given if given else [1 << i for i in range(11) if 1 << i <= MAX_LEVEL]


def sweep(
    base: str,
    model: str,
    *,
    concurrency: Optional[List[int]],
    requests: int,
    input_len: int,
    output_len: int,
    prefix_cache: bool,
    budget_s: float,
    slo_tpot_ms: Optional[float],
    progress: Callable[[str], None],
    metrics: Optional[Callable[[], Optional[Dict[str, float]]]] = None,
    runner: Optional[Callable[..., Level]] = None,
    clocks: Optional[Callable[[], Optional[Dict[str, float]]]] = None,
) -> List[Level]:
    """Each level of `concurrency`, or doubling from 1 until throughput stops growing or TPOT passes the SLO;
    `metrics` reads the server's /metrics (bench/reasons.py): its counters before and after each level, its
    waiting gauge during it; `runner` measures a level (run_level's arguments; default: the own client); `clocks`
    reads the server's cards' AI Core clocks (reasons.clock_reader) every CLOCK_EVERY seconds during a level."""
    measure = runner or run_level
    done: List[Level] = []
    for c in levels(concurrency):
        progress(f"concurrency {c}: {max(requests, c)} requests ...")
        before = metrics() if metrics else None
        with Watch(metrics or (lambda: None)) as watch, Watch(
            clocks or (lambda: None), names=(), every=CLOCK_EVERY
        ) as clock_watch:
            level = measure(base, model, c, requests, input_len, output_len, prefix_cache, budget_s)
        after = metrics() if metrics else None
        level.preemptions, level.prefix_cache_hits, level.prefix_cache_queries = (
            grown(before, after, name) for name in (PREEMPTIONS, PREFIX_HITS, PREFIX_QUERIES)
        )
        level.waiting = watch.most.get(WAITING)
        level.clocks = dict(clock_watch.most) or None
        progress(
            f"concurrency {c}: {level.output_tok_s:g} tok/s, TPOT {level.measurement.tpot_ms:g} ms "
            f"({level.requests} requests in {level.duration_s:g} s)"
        )
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
