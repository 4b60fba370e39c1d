"""`ascend-setup bench [NAME | --url URL]`: the sweep over concurrency against a running server."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_prose, print_table, stdout_console, terminal_safe
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.utils.paths import resolve_workdir

if TYPE_CHECKING:  # imported where a run needs them: the parser (--help) stays light
    from ascend_setup.bench import verdict, vllm_bench
    from ascend_setup.bench.sweep import Level

COLUMNS = ["conc", "reqs", "tok/s", "req/s", "TTFT ms", "TPOT ms", "p90", "ITL ms", "E2EL s"]


def cells(level: Level) -> List[str]:
    m = level.measurement
    return [
        str(level.concurrency),
        str(level.requests),
        f"{level.output_tok_s:g}",
        f"{level.request_s:g}",
        f"{m.ttft_s * 1000:.1f}",
        f"{m.tpot_ms:.2f}",
        f"{m.tpot_p90_ms:.2f}",
        f"{m.itl_ms:.2f}",
        f"{m.e2el_s:.3f}",
    ]


def run(args: argparse.Namespace, output: Output) -> int:
    from ascend_setup.bench import plot, verdict, vllm_bench
    from ascend_setup.bench.bench_target import check_lengths, from_record, log_size, resolve, server_processes, triaged
    from ascend_setup.bench.reasons import Evidence, LevelEvidence, clock_reader, log_head, metrics, reasons
    from ascend_setup.bench.sweep import sweep
    from ascend_setup.serve.start_checks import card_processes

    if (args.name is None) == (args.url is None):
        raise BadInput("give a server NAME or --url, one of them", hint="'ascend-setup serve status' lists names")
    given = [f for f, v in (("--model-dir", args.model_dir), ("--card", args.card), ("--tp", args.tp)) if v]
    if args.name is not None and given:
        raise BadInput(f"{', '.join(given)}: for --url only", hint="serve's record gives a NAME's model, card and TP")
    log: Optional[Path] = None
    words: List[str] = []  # the server's command, when serve recorded it
    workdir = None
    url_ctx: Optional[verdict.Context] = None
    real: Optional[vllm_bench.VllmBench] = None
    if args.name is not None:
        workdir = resolve_workdir(args.workdir, mode="read")
        base, served, words, log = from_record(workdir, args.name)
        target = resolve(base, args.model or served, " ".join(words))
        real = vllm_bench.for_record(workdir, args.name) if args.client != "own" else None
    else:
        target = resolve(args.url, args.model)
        here = resolve_workdir(args.workdir, mode="read")
        workdir = here if here.is_dir() else None  # its earlier sweeps of this URL and model, when there is one
        url_ctx = verdict.url_context(target.model, target.base, args.model_dir, args.card, args.tp)
    if args.client == "vllm" and real is None:
        raise BadInput(
            "--client vllm: the server's venv has no vLLM benchmark (vllm/benchmarks/serve.py) or its "
            "model directory no tokenizer",
            hint="give a NAME 'serve --detach' started, or --client own",
        )
    check_lengths(target, args.input_len, args.output_len)
    if args.plot is not None:
        plot.check(args.plot)

    def progress(line: str) -> None:  # the heartbeat: one line per level start and end, on stderr
        sys.stderr.write(terminal_safe(f"bench: {line}") + "\n")
        sys.stderr.flush()

    offset = log_size(log) if log is not None else 0
    cards, own = server_processes(workdir, args.name) if workdir and args.name else ([], [])
    try:
        done = sweep(
            target.base,
            target.model,
            concurrency=args.concurrency,
            requests=args.requests,
            input_len=args.input_len,
            output_len=args.output_len,
            prefix_cache=args.prefix_cache,
            budget_s=args.time_budget,
            slo_tpot_ms=args.slo_tpot_ms,
            progress=progress,
            metrics=lambda: metrics(target.base),
            runner=partial(vllm_bench.run_level, real) if real else None,
            clocks=clock_reader(cards) if cards else None,
        )
    except BadInput:
        raise
    except AscendSetupError as failure:  # a level failed: a recorded server's log says why
        if log is None:
            raise
        raise triaged(failure, args.name, log, offset) from None
    rows = [level.row() for level in done]
    ctx = url_ctx or verdict.context_of(workdir, args.name, target.model, target.argv)
    fit = verdict.fit_figures(ctx, rows, args.input_len, args.output_len)
    found = reasons(
        Evidence(
            words,
            log_head(log),
            args.prefix_cache,
            [
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
                for lv in done
            ],
            cards,
            card_processes(None) if cards else None,
            own,
            verdict.tp_steps(ctx, [lv.concurrency for lv in done], args.input_len, args.output_len),
        )
    )
    client = real.label if real else "ascend-setup's client"
    result: Dict[str, Any] = {
        "url": target.base,
        "model": target.model,
        "client": client,
        "input_len": args.input_len,
        "output_len": args.output_len,
        "prefix_cache": args.prefix_cache,
        "levels": rows,
        "reasons": [reason.to_json() for reason in found],
    }
    judged = verdict.judge_sweep(
        workdir, args.name, target.model, target.argv, args.input_len, args.output_len, rows, found, ctx
    )
    result["verdicts"] = [v.to_json() for v in judged]
    if args.plot is not None:
        plot.draw(
            args.plot,
            result["levels"],
            f"bench {target.model}: input ~{args.input_len}, output {args.output_len} tokens",
            result["verdicts"],
        )
        result["plot"] = str(args.plot)
    if args.json:
        output.print_json(result)
        return 0
    out = stdout_console()
    print_prose(
        out,
        terminal_safe(
            f"bench {target.model} at {target.base}: input ~{args.input_len}, output "
            f"{args.output_len} tokens; {client}; medians, TPOT also p90"
        ),
    )
    print_table(out, None, COLUMNS, [cells(level) for level in done])
    for reason in found:
        print_prose(out, terminal_safe(f"reason ({reason.rule}): {reason.evidence}. Fix: {reason.fix}"))
    for line in verdict.lines(judged):
        print_prose(out, terminal_safe(f"verdict: {line}" if not line.startswith("reference ") else line))
    return 0


def bench_arguments(p: argparse.ArgumentParser) -> None:
    """`bench [NAME | --url URL]`: a server serve started, or any OpenAI-compatible one."""
    flags.common(p)
    p.add_argument("name", nargs="?", metavar="NAME", help="a server 'serve --detach' started ('serve status')")
    p.add_argument("--url", metavar="URL", help="any OpenAI-compatible server instead (http://host:port)")
    p.add_argument("--model", metavar="SERVED_NAME", help="the served model name (default: the server's only one)")
    p.add_argument(
        "--model-dir",
        type=flags.model_dir,
        metavar="PATH",
        help="--url: the served model's directory "
        "(its config.json and safetensors headers), for fit's figure with --card",
    )
    p.add_argument(
        "--card",
        type=flags.card_name,
        metavar="NAME",
        help="--url: the server's card (910B1 ... 910B4), for fit's figure and the published ones",
    )
    p.add_argument(
        "--tp",
        type=flags.ranged(int, 1, 64, "a number of cards"),
        metavar="N",
        help="--url: the server's tensor-parallel size (default 1)",
    )
    p.add_argument(
        "--concurrency",
        type=flags.ranged_list(int, 1, 4096, "a number of concurrent requests"),
        metavar="LIST",
        help="exactly these levels, e.g. 1,4,16 (default: 1, 2, 4, 8 ... until "
        "throughput grows under 5%% or TPOT passes --slo-tpot-ms)",
    )
    p.add_argument(
        "--input-len",
        type=flags.ranged(int, 1, 1 << 20, "a number of tokens"),
        default=128,
        metavar="N",
        help="prompt tokens, about (default 128)",
    )
    p.add_argument(
        "--output-len",
        type=flags.ranged(int, 2, 1 << 20, "a number of tokens"),
        default=128,
        metavar="N",
        help="tokens decoded per request, ignore_eos (default 128)",
    )
    p.add_argument(
        "--requests",
        type=flags.ranged(int, 1, 100_000, "a number of requests"),
        default=16,
        metavar="N",
        help="requests per level, at least the concurrency (default 16)",
    )
    p.add_argument(
        "--time-budget",
        type=flags.ranged(float, 1, 24 * 3600, "a time in seconds"),
        default=60.0,
        metavar="S",
        help="no request of a level starts after this many seconds (default 60)",
    )
    p.add_argument(
        "--slo-tpot-ms",
        type=flags.ranged(float, 0.01, 1e6, "a TPOT in ms"),
        metavar="MS",
        help="stop doubling once the median TPOT passes this",
    )
    p.add_argument(
        "--prefix-cache",
        action="store_true",
        help="one shared prefix: let the cache hit (default: a fresh random prefix per request)",
    )
    p.add_argument(
        "--plot",
        type=Path,
        metavar="FILE",
        help="draw throughput against per-user speed, one point per "
        "concurrency, to FILE.png or FILE.svg (needs: pip install 'ascend-setup[plot]')",
    )
    p.add_argument(
        "--client",
        choices=("auto", "vllm", "own"),
        default="auto",
        help="auto (default): the real 'vllm bench serve' where the server's venv has it and its model a "
        "tokenizer, else ascend-setup's own client (the same definitions); vllm or own: that one",
    )
    flags.workdir(p, "where serve's server records are")
    p.set_defaults(func=run)


ARGUMENTS = {"bench": bench_arguments}
