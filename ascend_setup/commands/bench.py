"""`ascend-setup bench [NAME | --url URL]`: the sweep over concurrency against a running server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Type, Union

from pydantic import BaseModel, ConfigDict, RootModel

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.render import Output, print_prose, print_table, terminal_safe
from ascend_setup.errors import EXIT_OK

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.bench.bench_run import Report, Server
    from ascend_setup.bench.sweep import Level

COLUMNS = ["conc", "reqs", "tok/s", "req/s", "TTFT ms", "TPOT ms", "p90", "ITL ms", "E2EL s"]


class BenchOptions(Options):
    name: Optional[str] = None
    url: Optional[str] = None
    model: Optional[str] = None
    model_dir: Optional[Path] = None
    card: Optional[str] = None
    tp: Optional[int] = None
    concurrency: Optional[List[int]] = None
    input_len: int = 128
    output_len: int = 128
    requests: int = 16
    time_budget: float = 60.0
    slo_tpot_ms: Optional[float] = None
    prefix_cache: bool = False
    plot: Optional[Path] = None
    client: Literal["auto", "vllm", "own"] = "auto"
    workdir: Optional[str] = None


class ReasonDocument(BaseModel):
    """A reason the sweep's evidence supports (bench/reasons.py), with its fix and the levels it concerns."""

    model_config = ConfigDict(extra="forbid")

    rule: str
    evidence: str
    fix: str
    effect: Literal["slower", "faster", "either"]
    levels: Optional[List[int]]


class BenchDocument(BaseModel):
    """`bench --json`: each level's figures (bench/sweep.py `Level.row`), the reasons and the verdicts."""

    model_config = ConfigDict(extra="forbid")

    url: str
    model: str
    client: str
    input_len: int
    output_len: int
    prefix_cache: bool
    levels: List[Dict[str, Any]]
    reasons: List[ReasonDocument]
    verdicts: List[Dict[str, Any]]


class PlottedBenchDocument(BenchDocument):
    """With --plot: where the plot was drawn."""

    plot: str


class BenchCommandDocument(RootModel[Union[PlottedBenchDocument, BenchDocument]]):
    """`bench --json`, with or without --plot."""


DOCUMENTS: Dict[str, Type[BaseModel]] = {"bench": BenchCommandDocument}


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


def progress(line: str) -> None:
    """The heartbeat: one line per level start and end, on stderr."""
    sys.stderr.write(terminal_safe(f"bench: {line}") + "\n")
    sys.stderr.flush()


def run(options: BenchOptions, output: Output) -> Result:
    from ascend_setup.bench.bench_run import bench

    server, report = bench(options, progress)
    return Result(
        EXIT_OK,
        BenchCommandDocument.model_validate(report.document),
        lambda console: render(console, options, server, report),
    )


def render(out: Console, options: BenchOptions, server: Server, report: Report) -> None:
    from ascend_setup.bench import verdict
    from ascend_setup.bench.bench_run import client_label

    print_prose(
        out,
        terminal_safe(
            f"bench {server.target.model} at {server.target.base}: input ~{options.input_len}, output "
            f"{options.output_len} tokens; {client_label(server)}; medians, TPOT also p90"
        ),
    )
    print_table(out, None, COLUMNS, [cells(level) for level in report.done])
    for reason in report.found:
        print_prose(out, terminal_safe(f"reason ({reason.rule}): {reason.evidence}. Fix: {reason.fix}"))
    for line in verdict.lines(report.judged):
        print_prose(out, terminal_safe(f"verdict: {line}" if not line.startswith("reference ") else line))


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
    p.set_defaults(func=run, options=BenchOptions)


ARGUMENTS = {"bench": bench_arguments}
