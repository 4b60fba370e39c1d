"""`ascend-setup serve MODEL` (`serve start MODEL`): from a verified environment to a model that answers,
measured; `serve status`, `serve stop [NAME]`. Thin: the serve room reads the host (serve/context.py), composes
and validates (serve/prepare.py), runs, smokes and measures (serve/session.py) and stops (serve/stop.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Type, Union

from pydantic import BaseModel, ConfigDict, Field, RootModel

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.render import Output, terminal_safe
from ascend_setup.cli.subcommands import add_subcommands
from ascend_setup.errors import EXIT_OK

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.fit.estimate import Fit
    from ascend_setup.serve.compose import ServePlan
    from ascend_setup.serve.context import Context

Number = Union[int, float]


class ServeOptions(Options):
    serve_command: Literal["start"] = "start"
    model: str
    vllm_args: List[str] = Field(default_factory=list)
    venv: Optional[str] = None
    workdir: Optional[str] = None
    cann_home: Optional[str] = None
    port: int = 8000
    tp: Optional[int] = None
    card: Optional[str] = None
    max_model_len: Optional[int] = None
    concurrency: int = 1
    gpu_memory_utilization: float = 0.9
    ready_timeout: Optional[float] = None
    measure_tokens: int = 256
    dry_run: bool = False
    detach: bool = False


class ServeStatusOptions(Options):
    serve_command: Literal["status"] = "status"
    workdir: Optional[str] = None


class ServeStopOptions(Options):
    serve_command: Literal["stop"] = "stop"
    name: Optional[str] = None
    workdir: Optional[str] = None


class Choice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    words: List[str]
    why: str


class VersionVerdict(BaseModel):
    """What preflight's version check finds in the venv, against the row's pin."""

    model_config = ConfigDict(extra="forbid")

    name: str
    found: Optional[str]
    pin: str
    accepted: bool
    note: str


class ServePlanDocument(BaseModel):
    """The composed command (serve/compose.py `ServePlan`): each variable and argument with why it is there."""

    model_config = ConfigDict(extra="forbid")

    name: str
    model: str
    vllm: str
    port: int
    cards: List[int]
    tp: int
    max_model_len: int
    concurrency: int
    families: List[str]
    plugin: str
    env: List[Choice]
    args: List[Choice]
    notes: List[str]
    set_env: List[str]
    served_name: str
    host: Optional[str]
    argv: List[str]
    environment: Dict[str, str]
    graph_mode: bool


class DryRunDocument(ServePlanDocument):
    """`serve MODEL --dry-run --json`: the plan, whether the installed plugin validated it, the card, the
    warnings and the version verdicts."""

    validated: bool
    note: Optional[str]
    card: str
    card_source: str
    warnings: List[str]
    versions: List[VersionVerdict]


class ServedDocument(BaseModel):
    """`serve MODEL --json`: the server ready and measured (serve/measure.py `write_result`, then where it runs)."""

    model_config = ConfigDict(extra="forbid")

    card: str
    cann: str
    tp: int
    graph_mode: bool
    model: str
    bytes_per_token: int
    tok_s: Number
    ttft_s: Number
    tpot_ms: Number
    tpot_p90_ms: Number
    itl_ms: Number
    itl_p90_ms: Number
    e2el_s: Number
    runs: List[Dict[str, Any]]
    predicted_tok_s: Optional[Number]
    ratio: Optional[Number]
    command: List[str]
    environment: Dict[str, str]
    versions: Dict[str, Optional[str]]
    simulated: bool
    measured_at: Number
    bound: Literal["bandwidth", "launch"]
    recorded: bool
    name: str
    url: str
    pid: int
    log: str
    answer: str
    ready_seconds: Number
    detached: bool
    served_name: str
    host: Optional[str]
    exposed: bool


class ServeDocument(RootModel[Union[ServedDocument, DryRunDocument]]):
    """`serve MODEL --json`: the measured server, or (with --dry-run) the plan."""


class Cause(BaseModel):
    """Why a recorded server is gone: its log's triage."""

    model_config = ConfigDict(extra="forbid")

    id: Optional[str]
    cause: Optional[str]
    fix: Optional[str]
    line_number: int


class ServerRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    pid: int
    port: int
    cards: List[int]
    running: bool
    log: str
    detached: bool
    figures: Optional[str]
    cause: Optional[Cause]


class StatusDocument(BaseModel):
    """`serve status --json`: each server started from the workdir."""

    model_config = ConfigDict(extra="forbid")

    servers: List[ServerRow]


class StopDocument(BaseModel):
    """`serve stop --json`: the server stopped, and whether it was still running."""

    model_config = ConfigDict(extra="forbid")

    stopped: str
    pid: int
    was_running: bool


DOCUMENTS: Dict[str, Type[BaseModel]] = {
    "serve start": ServeDocument,
    "serve status": StatusDocument,
    "serve stop": StopDocument,
}


def say(text: str) -> None:
    """A line on stderr, as it is (a path, a name: no markup)."""
    from ascend_setup.cli.render import stderr_console

    stderr_console().print(text, soft_wrap=True, markup=False, highlight=False)


def run(options: ServeOptions, output: Output) -> Result:
    from ascend_setup.serve import prepare, server_records
    from ascend_setup.serve.context import gather
    from ascend_setup.serve.start_checks import check_port, version_verdicts

    ctx = gather(options)
    composed, fit = prepare.plan(ctx)
    if not options.dry_run:
        server_records.refuse_second(ctx.workdir, ctx.name, options.port, ctx.cards)  # ours: exit 3, before "in use"
        check_port(options.port)
    validated, warnings = prepare.validate(ctx, composed)
    versions = version_verdicts(ctx.row, ctx.facts) if ctx.facts else []
    if options.dry_run:
        script = prepare.dry_run_script(ctx, composed, validated, versions, warnings)
        return Result(
            EXIT_OK,
            ServeDocument.model_validate(prepare.dry_run_document(ctx, composed, validated, versions, warnings)),
            lambda console: print_lines(console, script),
        )
    for note in [v.note for v in versions if v.note] + warnings:
        say(f"note: {note}")
    return serve_and_wait(ctx, composed, fit, output)


def print_lines(console: Console, lines: List[str]) -> None:
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def serve_and_wait(ctx: Context, composed: ServePlan, fit: Fit, output: Output) -> Result:
    """Preflight, then the server started and measured; its figures shown at once (a foreground server keeps
    this command until it ends), then waited on or left running."""
    from ascend_setup.cli.progress import PhaseReporter
    from ascend_setup.cli.render import stderr_console, stdout_console
    from ascend_setup.serve.serving import exposed, serve, until_it_ends
    from ascend_setup.serve.start_checks import card_processes, preflight

    assert ctx.facts is not None  # gather refused a venv without them outside a dry run
    preflight(
        row=ctx.row,
        facts=ctx.facts,
        device=ctx.npu.device_type,
        env=ctx.env,
        cards=ctx.cards,
        busy=card_processes(ctx.cann.driver.root if ctx.cann and ctx.cann.driver else None),
        model=ctx.model,
        files=ctx.files,
    )
    served = serve(ctx, composed, fit, PhaseReporter(stderr_console()))
    document = ServeDocument.model_validate(served.summary)
    if output.json:
        output.print_json(document.model_dump(mode="json"))
    else:
        print_lines(stdout_console(), [served.figures])
    base, log = served.launched.base, served.launched.log
    if not ctx.settings.detach:
        say(f"serving {ctx.name} at {base} (log {log}); Ctrl-C stops it")
        until_it_ends(ctx, served.launched, say)
        return Result(EXIT_OK, document)
    pid = served.launched.proc.pid
    say(f"serving {ctx.name} at {base} (pid {pid}, log {log}); 'ascend-setup serve stop {ctx.name}' stops it")
    if exposed(composed.host):
        say(
            f"note: it listens on {composed.host or 'every interface'} (your --host), not only on loopback: "
            "its API asks for no key, and it stays up after this command"
        )
    return Result(EXIT_OK, document)


def run_status(options: ServeStatusOptions, output: Output) -> Result:
    from ascend_setup.serve.stop import status_with_causes
    from ascend_setup.utils.paths import resolve_workdir

    workdir = resolve_workdir(options.workdir, mode="read")
    document = StatusDocument.model_validate({"servers": status_with_causes(workdir)})
    return Result(EXIT_OK, document, lambda console: render_status(console, document, str(workdir)))


def render_status(out: Console, document: StatusDocument, workdir: str) -> None:
    if not document.servers:
        out.print(f"no server was started from {workdir}", soft_wrap=True, markup=False)
    for row in document.servers:
        state = "running" if row.running else "gone"
        cause = ""
        if row.cause:
            cause = f"\n  cause (log line {row.cause.line_number}): {terminal_safe(str(row.cause.cause))}"
            cause += f"\n  fix: {terminal_safe(row.cause.fix)}" if row.cause.fix else ""
        out.print(
            terminal_safe(
                f"{row.name}: {state}, pid {row.pid}, port {row.port}, card "
                f"{','.join(map(str, row.cards))}, log {row.log}"
            )  # a record's text
            + (f"\n  {terminal_safe(row.figures)}" if row.figures else "")
            + cause,
            soft_wrap=True,
            markup=False,
            highlight=False,
        )


def run_stop(options: ServeStopOptions, output: Output) -> Result:
    from ascend_setup.serve.stop import stop_recorded
    from ascend_setup.utils.paths import resolve_workdir

    stopped, running = stop_recorded(resolve_workdir(options.workdir, mode="read"), options.name)
    said = (
        f"stopped {stopped.name} (pid {stopped.pid}, and its process group)"
        if running
        else f"{stopped.name} (pid {stopped.pid}) was no longer running; its record is removed"
    )
    return Result(
        EXIT_OK,
        StopDocument(stopped=stopped.name, pid=stopped.pid, was_running=running),
        lambda console: console.print(said, markup=False),
    )


def start_arguments(p: argparse.ArgumentParser) -> None:
    """`serve [start] MODEL [-- ARGS]`."""
    flags.common(p)
    p.add_argument("model", metavar="MODEL", help="a model directory, or a hub id that 'model fetch' fetched")
    p.add_argument(
        "vllm_args",
        nargs="*",
        metavar="-- ARGS",
        help="after --: arguments for 'vllm serve' (validated; yours win; --additional-config merged into one)",
    )
    flags.venv(p, "the installed venv (default <workdir>/venv)")
    flags.workdir(p, "where serve/<name>.log, .json and the server records go")
    flags.cann_home(p, "CANN root whose set_env.sh the server runs with")
    p.add_argument(
        "--port", type=flags.ranged(int, 1, 65535, "a TCP port"), default=8000, help="the server's port (default 8000)"
    )
    p.add_argument(
        "--tp",
        type=flags.ranged(int, 1, 64, "a number of cards"),
        metavar="N",
        help="tensor-parallel cards (default: one, or as many as --card)",
    )
    p.add_argument("--card", metavar="N[,M...]", help="NPU index(es) to serve on (default: the first --tp cards)")
    p.add_argument(
        "--max-model-len",
        type=flags.ranged(int, 1, 16 * 1024 * 1024, "a context length in tokens"),
        metavar="N",
        help="context length (default: the largest the KV budget holds at --concurrency, "
        "capped at the model's own maximum)",
    )
    p.add_argument(
        "--concurrency",
        type=flags.ranged(int, 1, 4096, "a number of sequences"),
        default=1,
        metavar="N",
        help="sequences the KV budget must hold at --max-model-len (default 1)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=flags.ranged(float, 0.01, 1, "a share of HBM"),
        default=0.9,
        help="share of HBM vLLM may use (default 0.9)",
    )
    p.add_argument(
        "--ready-timeout",
        type=flags.ranged(float, 1, 24 * 3600, "a deadline in seconds"),
        metavar="SECONDS",
        help="start-up deadline (default: from the weights' size, plus compile and graph capture)",
    )
    p.add_argument(
        "--measure-tokens",
        type=flags.ranged(int, 2, 65536, "a number of tokens"),
        default=256,
        metavar="N",
        help=argparse.SUPPRESS,
    )
    flags.dry_run(p, "print the environment and the command, one item a line with why; start nothing")
    p.add_argument(
        "--detach", action="store_true", help="leave the server running after the measurement ('serve stop' ends it)"
    )
    p.set_defaults(func=run, options=ServeOptions, after_dashes="vllm_args")


def status_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.workdir(p, "where the server records are")
    p.set_defaults(func=run_status, options=ServeStatusOptions)


def stop_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    p.add_argument("name", nargs="?", metavar="NAME", help="the server to stop (default: the only one recorded)")
    flags.workdir(p, "where the server records are")
    p.set_defaults(func=run_stop, options=ServeStopOptions)


def serve_arguments(p: argparse.ArgumentParser) -> None:
    """`serve [start] MODEL [-- ARGS]`, `serve status`, `serve stop [NAME]`: a first word that names no
    sub-command is MODEL (a model directory named `status` is served as `./status`)."""
    p.epilog = "serve's options: 'ascend-setup serve MODEL --help' (the same as 'serve start --help')"
    sub = add_subcommands(p, dest="serve_command", metavar="MODEL|status|stop", default="start")
    start_arguments(
        sub.add_parser(
            "start",
            help="(the default: 'serve MODEL') compose, validate, start, smoke-test and measure 'vllm serve'",
        )
    )
    status_arguments(sub.add_parser("status", help="the servers started from the workdir, and why a gone one ended"))
    stop_arguments(sub.add_parser("stop", help="stop a server serve started (by its record: pid and start time)"))


ARGUMENTS = {"serve": serve_arguments}
