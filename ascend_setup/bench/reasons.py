"""The reason for a gap, from evidence, each with its fix: one rule per reason, each a pure function of its
evidence and quiet without it. The evidence (Evidence) is what bench can read of the server:

- its command line (serve's record; '' for a bare URL), read with vLLM 0.23.0's parser rules (serve/vllm_args.py),
  so every spelling vLLM accepts counts (`--max_num_seqs=8`, `--max-num-seq 8`, `--speculative-config.method mtp`);
- its log (serve's record names it): the engine's start-up line (`enforce_eager=True`, `speculative_config=`) and
  whether it captured graphs;
- its /metrics, read before and after each level (counters: vllm:num_preemptions_total, vllm:prefix_cache_hits_total
  and _queries_total) and during it (the gauge vllm:num_requests_waiting);
- fit's per-step figures for each level, graph and eager (bench/verdict.py), and the sweep's --prefix-cache.

Each Reason says which way it moves the figures (`effect`: slower, faster, either) and, when it is a level's, at
which concurrencies (`levels`); the verdict gives a level the reasons that can explain its gap.
- npu-smi's process rows for the server's cards (serve's reading of `npu-smi info`), for a server serve started;
- npu-smi's AI Core clock of the server's cards (`npu-smi info -t common -i N`: host/npu.py card_clocks), read
  during each level, for a server serve started;
- fit's step at the server's TP and at each smaller TP that holds the model (bench/verdict.py tp_steps): TP wider
  than a launch-bound model needs.
"""

from __future__ import annotations

import math
import re
import threading
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

PREEMPTIONS = re.compile(r"^vllm:num_preemptions_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.M)
#: A sample line of /metrics: name, optional labels, value.
SAMPLE = re.compile(r"^(vllm:[A-Za-z0-9_:]+)(?:\{[^}]*\})?\s+([0-9.eE+-]+|NaN|[+-]Inf)\s*$", re.M)
#: vLLM 0.23.0's V1 names (counters of prompt tokens; prometheus_client adds _total).
PREFIX_HITS = "vllm:prefix_cache_hits_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
WAITING = "vllm:num_requests_waiting"
#: The engine's start-up line, which lists its config: `... enforce_eager=False, ...`.
ENGINE_LINE = re.compile(r"Initializing a V1 LLM engine.*? with config: (.*)$", re.M)
#: What a start-up that captured graphs logs (vLLM's "Capturing CUDA graphs", vllm-ascend's ACL graphs, the end).
CAPTURE = re.compile(r"Capturing (?:CUDA |ACL |NPU )?graphs|Graph capturing finished", re.I)
#: The engine finished starting (a log that stops before it cannot say that capture was skipped).
STARTED = re.compile(r"init engine \(profile, create kv cache, warmup model\) took|Application startup complete")
#: Read of the server's log: its start-up is at the head.
LOG_HEAD = 8 << 20
#: Share of prompt tokens served from the prefix cache during a level above which the cache hid prefill.
PREFIX_SHARE = 0.10
#: A measured TPOT this close to fit's eager figure (and nearer it than the graph figure) points to eager mode.
EAGER_NEAR = 0.25


@dataclass
class Reason:
    rule: str
    evidence: str
    fix: str
    effect: str = "slower"  # which gap it explains: slower, faster, either
    levels: Optional[List[int]] = None  # the concurrencies it concerns (None: every level)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    def concerns(self, concurrency: int, verdict: str) -> bool:
        """Whether this reason can explain `verdict` at `concurrency`."""
        way = "slower" if verdict.startswith("slower") else "faster" if verdict.startswith("faster") else None
        return (
            way is not None and self.effect in (way, "either") and (self.levels is None or concurrency in self.levels)
        )


@dataclass
class LevelEvidence:
    concurrency: int
    tpot_ms: Optional[float] = None
    preemptions: Optional[float] = None  # growth of vllm:num_preemptions_total during the level
    prefix_hits: Optional[float] = None  # growth of vllm:prefix_cache_hits_total (tokens)
    prefix_queries: Optional[float] = None  # growth of vllm:prefix_cache_queries_total (tokens)
    waiting: Optional[float] = None  # the most vllm:num_requests_waiting read during the level
    fit_tpot_ms: Optional[float] = None  # fit's step at this level, graph mode
    fit_eager_tpot_ms: Optional[float] = None  # the same under --enforce-eager
    clocks: Optional[Dict[str, float]] = None  # the most of each card's clock fields read during it (clock_reader)


@dataclass
class TpOption:
    tp: int  # a smaller TP the model's heads divide by
    tpot_ms: float  # fit's step there
    per_card_bytes: float  # the weights and this level's KV (each sequence at its full length) on one card there


@dataclass
class TpStep:
    """fit's batch step at one level (fit/batch.step, the card's terms) at the server's TP, and at smaller TPs."""

    concurrency: int
    tp: int
    fixed_ms: float  # the fixed (launch) cost of a step at `tp`
    tpot_ms: float  # the whole step at `tp`
    options: List[TpOption]
    capacity_bytes: float  # one card's device memory x the server's --gpu-memory-utilization (0.9 unless set)
    tp_from: str = "the server's command"  # where the TP was read: the command, serve's record, --tp


@dataclass
class Evidence:
    argv: Sequence[str] = ()  # the server's command: vllm serve MODEL [options] (empty: not known)
    log: Optional[str] = None  # the head of the server's log (None: not known)
    prefix_cache: bool = False  # bench ran with --prefix-cache
    levels: Sequence[LevelEvidence] = field(default_factory=list)
    cards: Sequence[int] = ()  # the server's cards (serve's record)
    card_processes: Optional[Dict[int, List[str]]] = None  # npu-smi: card -> "pid name" (None: not read)
    own_pids: Sequence[int] = ()  # the server's process and every one below it
    tp_steps: Sequence[TpStep] = ()  # fit's step per level at the server's TP and smaller ones (TP > 1 only)


# --- reading the evidence ---------------------------------------------------------------------------------------


def metrics_text(base: str, timeout: float = 5.0) -> Optional[str]:
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=timeout) as response:
            return str(response.read(8 << 20).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def samples(text: str) -> Dict[str, float]:
    """Every vllm: sample of a /metrics page, summed over its labels (engines, models); histograms' buckets and
    non-numbers left out."""
    found: Dict[str, float] = {}
    for name, value in SAMPLE.findall(text):
        try:
            number = float(value)
        except ValueError:
            continue
        if name.endswith("_bucket") or math.isnan(number) or math.isinf(number):
            continue
        found[name] = found.get(name, 0.0) + number
    return found


def metrics(base: str, timeout: float = 5.0) -> Optional[Dict[str, float]]:
    """The server's /metrics as name -> value (summed over engines), or None when it has none."""
    text = metrics_text(base, timeout)
    return samples(text) if text is not None else None


def preemptions_total(base: str, timeout: float = 5.0) -> Optional[float]:
    """The server's vllm:num_preemptions_total (summed over engines), or None when /metrics does not say."""
    text = metrics_text(base, timeout)
    if text is None:
        return None
    found = PREEMPTIONS.findall(text)
    try:
        return sum(float(v) for v in found) if found else None
    except ValueError:
        return None


class Watch:
    """/metrics during a level: `read` every `every` seconds on a thread, keeping the most of each gauge (of every
    one read when `names` is empty)."""

    def __init__(
        self, read: Callable[[], Optional[Dict[str, float]]], names: Sequence[str] = (WAITING,), every: float = 0.25
    ) -> None:
        self.read, self.names, self.every = read, tuple(names), every
        self.most: Dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            got = self.read() or {}
            for name in self.names or tuple(got):
                if name in got:
                    self.most[name] = max(self.most.get(name, got[name]), got[name])
            self._stop.wait(self.every)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def log_head(path: Optional[Path]) -> Optional[str]:
    """The head of the server's log (its start-up), or None when there is none to read."""
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read(LOG_HEAD).decode("utf-8", "replace")
    except OSError:
        return None


def settings(argv: Sequence[str]) -> Dict[str, Any]:
    """What the server's command set, by destination, as vLLM 0.23.0 reads it ({} when it is not a `vllm serve`
    command this parser reads: another vLLM's flags, or none known)."""
    from ascend_setup.serve.flag_table import serve_flags
    from ascend_setup.serve.vllm_args import ServeArgsError, given_dests

    words = list(argv)
    if "serve" not in words[:2]:
        return {}
    try:
        return given_dests(serve_flags(), words[words.index("serve") + 1 :])
    except (ServeArgsError, SystemExit):
        return {}


def engine_config(log: Optional[str]) -> Dict[str, str]:
    """The engine start-up line's `key=value` settings (the last start in the log), as text."""
    found = ENGINE_LINE.findall(log or "")
    if not found:
        return {}
    return dict(re.findall(r"(?:^|, )([a-z_]+)=((?:'[^']*'|\{[^}]*\}|[^,])*)", found[-1]))


# --- the rules ---------------------------------------------------------------------------------------------------


def _eager_flag(argv: Sequence[str]) -> bool:
    flags = [w.split("=", 1) for w in argv if w.replace("_", "-").split("=", 1)[0] == "--enforce-eager"]
    return bool(flags) and (len(flags[-1]) == 1 or flags[-1][1].lower() in ("true", "1", "yes"))


def eager_mode(argv: str, log: Optional[str] = None, given: Optional[Dict[str, Any]] = None) -> Optional[Reason]:
    """--enforce-eager on the server's command line (any spelling vLLM reads), or `enforce_eager=True` in its
    engine's start-up line: no graph capture, every step launched op by op."""
    given = settings(argv.split()) if given is None else given
    said = []
    if given.get("enforce_eager") is True or _eager_flag(argv.split()):
        said.append("the server was started with --enforce-eager")
    if engine_config(log).get("enforce_eager") == "True":
        said.append("its log's engine start-up line says enforce_eager=True")
    if not said:
        return None
    return Reason(
        "eager-mode",
        "; ".join(said),
        "start it without --enforce-eager: graph mode decoded 5.7x faster in the field report",
    )


def eager_speed(levels: Sequence[LevelEvidence]) -> Optional[Reason]:
    """The measured TPOT within EAGER_NEAR of fit's eager figure and nearer it than fit's graph figure (at levels
    where the two differ by more than that): the server decodes as an eager one does."""
    hit = [
        lv
        for lv in levels
        if lv.tpot_ms
        and lv.fit_tpot_ms
        and lv.fit_eager_tpot_ms
        and lv.fit_eager_tpot_ms > lv.fit_tpot_ms * (1 + 2 * EAGER_NEAR)
        and abs(lv.tpot_ms / lv.fit_eager_tpot_ms - 1) <= EAGER_NEAR
        and lv.tpot_ms >= math.sqrt(lv.fit_tpot_ms * lv.fit_eager_tpot_ms)
    ]
    if not hit:
        return None
    said = ", ".join(
        f"{lv.tpot_ms:g} ms at concurrency {lv.concurrency} (eager {lv.fit_eager_tpot_ms:g}, graph {lv.fit_tpot_ms:g})"
        for lv in hit
    )
    return Reason(
        "eager-speed",
        f"TPOT near fit's eager figure, far from its graph one: {said}",
        "the server decodes as in eager mode: look in its log for enforce_eager=True and for graph capture "
        "at start-up, and start it without --enforce-eager",
        levels=[lv.concurrency for lv in hit],
    )


def no_graph_capture(argv: str, log: Optional[str], given: Optional[Dict[str, Any]] = None) -> Optional[Reason]:
    """A non-eager server whose start-up finished without capturing graphs (no "Capturing CUDA graphs", no "Graph
    capturing finished"): it runs op by op as an eager one does. Quiet without a log, for an eager server (that
    reason says it), and for a log that stops before the engine started."""
    if log is None or eager_mode(argv, log, given) is not None or not STARTED.search(log) or CAPTURE.search(log):
        return None
    return Reason(
        "no-graph-capture",
        "the server's log shows its engine started without capturing graphs (no "
        "'Capturing CUDA graphs' or 'Graph capturing finished' line)",
        "graph mode did not engage: check --compilation-config (cudagraph_mode, not NONE), -O (not 0) and "
        "vllm-ascend's graph settings in --additional-config, then restart and look for the capture lines",
    )


def prefix_cached(prefix_cache: bool, levels: Sequence[LevelEvidence]) -> Optional[Reason]:
    """The prefix cache served prompts: bench ran with --prefix-cache, or vllm:prefix_cache_hits_total grew by
    PREFIX_SHARE or more of the prompt tokens queried during a level. TTFT and throughput then leave out prefill."""
    hit = [
        lv
        for lv in levels
        if lv.prefix_hits
        and lv.prefix_queries
        and lv.prefix_hits > 0
        and lv.prefix_hits / lv.prefix_queries >= PREFIX_SHARE
    ]
    said = (["bench ran with --prefix-cache (one shared prefix)"] if prefix_cache else []) + [
        f"vllm:prefix_cache_hits_total grew {lv.prefix_hits:g} of {lv.prefix_queries:g} prompt tokens at "
        f"concurrency {lv.concurrency}"
        for lv in hit
    ]
    if not said:
        return None
    return Reason(
        "prefix-cache",
        "; ".join(said),
        "prefix caching hid the prefill: TTFT and throughput are a cache's, not comparable with figures "
        "measured on fresh prompts; run bench without --prefix-cache (fresh random prefixes)",
        effect="faster",
        levels=None if prefix_cache else [lv.concurrency for lv in hit],
    )


def max_num_seqs_capped(
    argv: str, levels: Sequence[LevelEvidence], given: Optional[Dict[str, Any]] = None
) -> Optional[Reason]:
    """--max-num-seqs (any spelling vLLM reads) below a level's concurrency, or requests waiting
    (vllm:num_requests_waiting above 0) during a level: the batch was capped and the rest queued."""
    given = settings(argv.split()) if given is None else given
    cap = given.get("max_num_seqs")
    cap = cap if isinstance(cap, int) and cap > 0 else None
    over = [lv.concurrency for lv in levels if cap is not None and lv.concurrency > cap]
    queued = [lv for lv in levels if lv.waiting is not None and lv.waiting > 0 and lv.concurrency not in over]
    if not over and not queued:
        return None
    said = ([f"the server's --max-num-seqs {cap} is below concurrency {', '.join(map(str, over))}"] if over else []) + [
        f"vllm:num_requests_waiting reached {lv.waiting:g} at concurrency {lv.concurrency}" for lv in queued
    ]
    return Reason(
        "max-num-seqs",
        "; ".join(said),
        "the batch was capped and the rest waited (TTFT grows, TPOT does not fall): start the server with "
        "a --max-num-seqs at least the concurrency (and the KV cache for it), or bench at most "
        f"{cap if cap else 'that many'} at once",
        levels=sorted(over + [lv.concurrency for lv in queued]),
    )


def speculative(argv: str, log: Optional[str] = None, given: Optional[Dict[str, Any]] = None) -> Optional[Reason]:
    """--speculative-config on the command line (MTP, eagle, ngram ...) or a speculative_config in the engine's
    start-up line: a step gives a user more than one token, so TPOT is not the step fit predicts."""
    given = settings(argv.split()) if given is None else given
    said = []
    if given.get("speculative_config"):
        said.append(f"the server was started with --speculative-config {str(given['speculative_config'])[:80]}")
    logged = engine_config(log).get("speculative_config")
    if logged and logged != "None" and not said:
        said.append(f"its log's engine start-up line says speculative_config={logged[:80]}")
    if not said:
        return None
    return Reason(
        "speculative-decoding",
        "; ".join(said),
        "TPOT counts accepted tokens, several a step: compare with figures measured with the same "
        "speculative method and acceptance, or start without --speculative-config to compare with fit",
        effect="either",
    )


def preempted(grown: Sequence[Tuple[int, Optional[float]]]) -> Optional[Reason]:
    """vllm:num_preemptions_total grew during a level: the KV cache is too small for that concurrency.
    `grown` holds (concurrency, how much the counter grew during that level, None when unknown) per level."""
    hit = [(c, n) for c, n in grown if n is not None and n > 0]
    if not hit:
        return None
    said = ", ".join(f"{n:g} at concurrency {c}" for c, n in hit)
    return Reason(
        "preemptions",
        f"vllm:num_preemptions_total grew: {said}",
        f"the KV cache is too small for concurrency {hit[0][0]}: run fewer at once, or give the cache "
        "more (a higher --gpu-memory-utilization, a shorter --max-model-len, a wider TP)",
        levels=[c for c, _ in hit],
    )


def other_process(cards: Sequence[int], busy: Optional[Dict[int, List[str]]], own: Sequence[int]) -> Optional[Reason]:
    """npu-smi lists a process on one of the server's cards that is neither the server nor below it: it shares
    the card's HBM bandwidth and AI Cores with the server."""
    others = [
        (card, row)
        for card in cards
        for row in (busy or {}).get(card, [])
        if not row.split()[0].isdigit() or int(row.split()[0]) not in set(own)
    ]
    if not others:
        return None
    said = ", ".join(f"{row} on card {card}" for card, row in others)
    return Reason(
        "another-process",
        f"npu-smi lists another process on the server's cards: {said}",
        "stop it, or serve from a card nothing else uses ('npu-smi info' lists each card's processes)",
    )


#: The fixed cost above this share of fit's step: the step is launch-bound, so splitting the weights over more
#: cards saves little and the multi-card floor (all-reduces on every card: data/cards.yaml) costs more.
LAUNCH_SHARE = 0.5


def tp_wider(steps: Sequence[TpStep]) -> Optional[Reason]:
    """TP > 1 where fit's fixed (launch) cost is above LAUNCH_SHARE of the step, and fit's step at a smaller TP
    (the fastest one whose weights and KV fit a card) is faster: the all-reduces cost more than the split saves."""
    hit = []
    for s in steps:
        fitting = [o for o in s.options if o.per_card_bytes <= s.capacity_bytes and o.tpot_ms < s.tpot_ms]
        if s.tp > 1 and s.tpot_ms > 0 and s.fixed_ms > LAUNCH_SHARE * s.tpot_ms and fitting:
            hit.append((s, min(fitting, key=lambda o: o.tpot_ms)))
    if not hit:
        return None
    first, best = hit[0]
    said = "; ".join(
        f"at concurrency {s.concurrency}, {s.fixed_ms:g} of {s.tpot_ms:g} ms a step is fixed at TP "
        f"{s.tp}, and TP {o.tp} steps in {o.tpot_ms:g} ms with {o.per_card_bytes / 2**30:.1f} of "
        f"{s.capacity_bytes / 2**30:.1f} GiB a card"
        for s, o in hit
    )
    return Reason(
        "tp-wider-than-needed",
        f"TP {first.tp} (from {first.tp_from}) for a launch-bound model, by fit: {said}",
        f"serve at the smaller TP: --tensor-parallel-size {best.tp} (fit's step {best.tpot_ms:g} ms "
        f"against {first.tpot_ms:g}); TP pays all-reduces on every card each step, which a model this "
        "small does not win back",
        levels=[s.concurrency for s, _ in hit],
    )


#: A card whose highest AI Core clock during a level stays this share under its rated one runs below it.
CLOCK_SHORT = 0.05
#: ... when its AI Core usage reached this (an idle card lowers its clock: Huawei's example prints 100 of 1650 MHz).
BUSY_PCT = 10.0
CLOCK_FIELDS = ("rated_mhz", "current_mhz", "usage_pct")


def clock_reader(cards: Sequence[int], driver_root: Optional[str] = None) -> Callable[[], Optional[Dict[str, float]]]:
    """A read of the cards' AI Core clocks for Watch: "CARD rated_mhz", "CARD current_mhz", "CARD usage_pct"."""
    from ascend_setup.host.npu import card_clocks

    def read() -> Optional[Dict[str, float]]:
        got = card_clocks(driver_root, list(cards))
        return {
            f"{card} {name}": value
            for card, clock in got.items()
            for name, value in zip(CLOCK_FIELDS, (clock.rated_mhz, clock.current_mhz, clock.usage_pct))
            if value is not None
        } or None

    return read


def clock_below(levels: Sequence[LevelEvidence]) -> Optional[Reason]:
    """npu-smi's current AI Core clock of a server's card, at its highest during a level in which the card was busy
    (AI Core usage BUSY_PCT or more), stayed more than CLOCK_SHORT under the card's rated clock (both of
    `npu-smi info -t common -i N`): the card runs below its nominal clock."""
    hit = []
    for lv in levels:
        got = lv.clocks or {}
        for card in sorted({k.split()[0] for k in got}):
            rated, current, usage = (got.get(f"{card} {name}") for name in CLOCK_FIELDS)
            if (
                rated
                and current is not None
                and usage is not None
                and usage >= BUSY_PCT
                and current < rated * (1 - CLOCK_SHORT)
            ):
                hit.append((lv.concurrency, card, current, rated, usage))
    if not hit:
        return None
    said = ", ".join(
        f"card {card} at most {current:g} of its rated {rated:g} MHz at concurrency {c} (AI Core usage "
        f"up to {usage:g}%)"
        for c, card, current, rated, usage in hit
    )
    return Reason(
        "clock-below-nominal",
        f"npu-smi's AI Core clock (Aicore curFreq against Aicore Freq) stayed below the rated one while busy: {said}",
        "the card runs below its nominal clock (power capping, heat, or a power-saving setting): look at "
        "'npu-smi info -t common -i N' under load, the card's temperature and power, and its cooling; "
        "published figures were measured at the rated clock",
        levels=sorted({c for c, *_ in hit}),
    )


def reasons(evidence: Evidence) -> List[Reason]:
    """Every rule over the evidence: the reasons found, each once."""
    argv = " ".join(evidence.argv)
    given = settings(evidence.argv)
    eager = eager_mode(argv, evidence.log, given)
    found = [
        eager,
        None if eager else eager_speed(evidence.levels),
        no_graph_capture(argv, evidence.log, given),
        preempted([(lv.concurrency, lv.preemptions) for lv in evidence.levels]),
        max_num_seqs_capped(argv, evidence.levels, given),
        speculative(argv, evidence.log, given),
        prefix_cached(evidence.prefix_cache, evidence.levels),
        other_process(evidence.cards, evidence.card_processes, evidence.own_pids),
        tp_wider(evidence.tp_steps),
        clock_below(evidence.levels),
    ]
    return [r for r in found if r is not None]
