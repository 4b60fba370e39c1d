"""One `bench` run, from the server to the report: which server (a NAME `serve --detach` recorded, or a URL),
the sweep over concurrency (a failed level triaged from the recorded server's log), then the evidence each
level leaves, the reasons it supports and the verdicts against fit, published figures and earlier runs.

The command passes its options model; what this room reads of it is `BenchFlags`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from ascend_setup.bench import plot, verdict, vllm_bench
from ascend_setup.bench.bench_target import Target, check_lengths, from_record, log_size, resolve, server_processes
from ascend_setup.bench.reasons import Evidence, LevelEvidence, Reason, clock_reader, log_head, metrics, reasons
from ascend_setup.bench.sweep import Level, sweep
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.serve.run import triaged_failure
from ascend_setup.serve.start_checks import card_processes
from ascend_setup.utils.paths import resolve_workdir


class BenchFlags(Protocol):
    """bench's flags, as the sweep reads them."""

    @property
    def name(self) -> Optional[str]: ...
    @property
    def url(self) -> Optional[str]: ...
    @property
    def model(self) -> Optional[str]: ...
    @property
    def model_dir(self) -> Optional[Path]: ...
    @property
    def card(self) -> Optional[str]: ...
    @property
    def tp(self) -> Optional[int]: ...
    @property
    def concurrency(self) -> Optional[List[int]]: ...
    @property
    def input_len(self) -> int: ...
    @property
    def output_len(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def time_budget(self) -> float: ...
    @property
    def slo_tpot_ms(self) -> Optional[float]: ...
    @property
    def prefix_cache(self) -> bool: ...
    @property
    def plot(self) -> Optional[Path]: ...
    @property
    def client(self) -> str: ...
    @property
    def workdir(self) -> Optional[str]: ...


@dataclass
class Server:
    """The server a sweep measures, and what is known of it: for a recorded one its log, its command's words
    and the real `vllm bench serve` of its venv (when there is one); for a URL the flags' figures."""

    target: Target
    workdir: Optional[Path] = None
    log: Optional[Path] = None
    words: List[str] = field(default_factory=list)
    url_ctx: Optional[verdict.Context] = None
    real: Optional[vllm_bench.VllmBench] = None


@dataclass
class Sweep:
    """The levels measured, and the processes they ran against (a recorded server's cards and its tree)."""

    done: List[Level]
    cards: List[int]
    own: List[int]


@dataclass
class Report:
    """The sweep's document (its keys are bench --json's), and the pieces the human form prints."""

    document: Dict[str, Any]
    done: List[Level]
    found: List[Reason]
    judged: List[verdict.LevelVerdict]


def check_flags(flags: BenchFlags) -> None:
    """NAME or --url, one of them; the --url-only flags not with a NAME (serve's record says those)."""
    if (flags.name is None) == (flags.url is None):
        raise BadInput("give a server NAME or --url, one of them", hint="'ascend-setup serve status' lists names")
    given = [f for f, v in (("--model-dir", flags.model_dir), ("--card", flags.card), ("--tp", flags.tp)) if v]
    if flags.name is not None and given:
        raise BadInput(f"{', '.join(given)}: for --url only", hint="serve's record gives a NAME's model, card and TP")


def find_server(flags: BenchFlags) -> Server:
    """The server NAME or --url names, answering; bad input when --client vllm cannot be had, or the lengths
    exceed its context, or --plot cannot be drawn."""
    if flags.name is not None:
        workdir = resolve_workdir(flags.workdir, mode="read")
        base, served, words, log = from_record(workdir, flags.name)
        server = Server(
            resolve(base, flags.model or served, " ".join(words)),
            workdir,
            log,
            words,
            real=vllm_bench.for_record(workdir, flags.name) if flags.client != "own" else None,
        )
    else:
        assert flags.url is not None
        target = resolve(flags.url, flags.model)
        here = resolve_workdir(flags.workdir, mode="read")
        server = Server(
            target,
            here if here.is_dir() else None,  # its earlier sweeps of this URL and model, when there is one
            url_ctx=verdict.url_context(target.model, target.base, flags.model_dir, flags.card, flags.tp),
        )
    if flags.client == "vllm" and server.real is None:
        raise BadInput(
            "--client vllm: the server's venv has no vLLM benchmark (vllm/benchmarks/serve.py) or its "
            "model directory no tokenizer",
            hint="give a NAME 'serve --detach' started, or --client own",
        )
    check_lengths(server.target, flags.input_len, flags.output_len)
    if flags.plot is not None:
        plot.check(flags.plot)
    return server


def measure(flags: BenchFlags, server: Server, progress: Callable[[str], None]) -> Sweep:
    """The sweep; a level that fails against a recorded server is triaged from its log since the sweep began."""
    offset = log_size(server.log) if server.log is not None else 0
    cards: List[int] = []
    own: List[int] = []
    if server.workdir is not None and flags.name is not None:
        cards, own = server_processes(server.workdir, flags.name)
    target = server.target
    try:
        done = sweep(
            target.base,
            target.model,
            concurrency=flags.concurrency,
            requests=flags.requests,
            input_len=flags.input_len,
            output_len=flags.output_len,
            prefix_cache=flags.prefix_cache,
            budget_s=flags.time_budget,
            slo_tpot_ms=flags.slo_tpot_ms,
            progress=progress,
            metrics=lambda: metrics(target.base),
            runner=partial(vllm_bench.run_level, server.real) if server.real else None,
            clocks=clock_reader(cards) if cards else None,
        )
    except BadInput:
        raise
    except AscendSetupError as failure:  # a level failed: a recorded server's log says why
        if server.log is None:
            raise
        raise triaged_failure(failure.message, server.log, offset, source=f"; server {flags.name}'s log") from None
    return Sweep(done, cards, own)


def evidence(
    flags: BenchFlags, server: Server, swept: Sweep, ctx: verdict.Context, fit: Dict[int, verdict.Reference]
) -> Evidence:
    """What the sweep leaves for the reasons: the server's command and log, each level's figures beside fit's,
    the processes on its cards, and what a wider TP would give."""
    levels = [
        LevelEvidence(
            lv.concurrency,
            lv.measurement.tpot_ms,
            lv.preemptions,
            lv.prefix_cache_hits,
            lv.prefix_cache_queries,
            lv.waiting,
            fit[lv.concurrency].tpot_ms,
            fit[lv.concurrency].eager_tpot_ms,
            lv.clocks,
        )
        for lv in swept.done
    ]
    return Evidence(
        server.words,
        log_head(server.log),
        flags.prefix_cache,
        levels,
        swept.cards,
        card_processes(None) if swept.cards else None,
        swept.own,
        verdict.tp_steps(ctx, [lv.concurrency for lv in swept.done], flags.input_len, flags.output_len),
    )


def report(flags: BenchFlags, server: Server, swept: Sweep) -> Report:
    """The reasons and verdicts of a sweep, the run saved beside the earlier ones, the plot drawn."""
    target = server.target
    rows = [level.row() for level in swept.done]
    ctx = server.url_ctx or verdict.context_of(server.workdir, flags.name, target.model, target.argv)
    fit = verdict.fit_figures(ctx, rows, flags.input_len, flags.output_len)
    found = reasons(evidence(flags, server, swept, ctx, fit))
    document: Dict[str, Any] = {
        "url": target.base,
        "model": target.model,
        "client": client_label(server),
        "input_len": flags.input_len,
        "output_len": flags.output_len,
        "prefix_cache": flags.prefix_cache,
        "levels": rows,
        "reasons": [reason.to_json() for reason in found],
    }
    judged = verdict.judge_sweep(
        server.workdir, flags.name, target.model, target.argv, flags.input_len, flags.output_len, rows, found, ctx
    )
    document["verdicts"] = [v.to_json() for v in judged]
    if flags.plot is not None:
        plot.draw(
            flags.plot,
            document["levels"],
            f"bench {target.model}: input ~{flags.input_len}, output {flags.output_len} tokens",
            document["verdicts"],
        )
        document["plot"] = str(flags.plot)
    return Report(document, swept.done, found, judged)


def client_label(server: Server) -> str:
    return server.real.label if server.real else "ascend-setup's client"


def bench(flags: BenchFlags, progress: Callable[[str], None]) -> Tuple[Server, Report]:
    """The whole run: the server, the sweep, the report."""
    check_flags(flags)
    server = find_server(flags)
    return server, report(flags, server, measure(flags, server, progress))
