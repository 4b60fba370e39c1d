"""`ascend-setup serve MODEL`: from a verified environment to a model that answers, measured; `serve status`,
`serve stop`. Thin: the serve room composes, validates, runs, smokes, measures and stops."""

from __future__ import annotations

import argparse
import os
import re
import signal
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.cli import flags
from ascend_setup.cli.progress import PhaseReporter
from ascend_setup.cli.render import Output, stderr_console, stdout_console, terminal_safe
from ascend_setup.dists.venv_reader import read_pyvenv_cfg, venv_python
from ascend_setup.dists.versions import PinVerdict
from ascend_setup.engine.runner import FIRST_RUN
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.fit.calibration import SpeedPoint, judge, now_utc, record_point
from ascend_setup.fit.cards import Card, card_for
from ascend_setup.fit.decode import bytes_per_token
from ascend_setup.fit.estimate import Fit, estimate, probed_bandwidth
from ascend_setup.fit.model_files import ModelFiles, local_files
from ascend_setup.host.cann import primary_cann, row_for
from ascend_setup.host.npu import host_npu
from ascend_setup.host.setenv import capture_env
from ascend_setup.hub.base import MODEL_ID
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.models import RuntimeHint
from ascend_setup.serve import server_records as records
from ascend_setup.serve.compose import ServePlan, choose_max_model_len, compose
from ascend_setup.serve.families import families_for, traits
from ascend_setup.serve.keys import installed_keys
from ascend_setup.serve.measure import measure, write_result
from ascend_setup.serve.run import deadline_seconds, served, start, stop_server, triaged_failure, wait_ready
from ascend_setup.serve.smoke import RequestFailed, chat, warm_up
from ascend_setup.serve.start_checks import (
    VenvFacts,
    card_processes,
    check_port,
    preflight,
    venv_facts,
    version_verdicts,
)
from ascend_setup.serve.stop import status, stop_recorded
from ascend_setup.serve.user_args import CONFIG, UserArgs, config_object, read_command
from ascend_setup.serve.validate import check_against
from ascend_setup.utils.interrupts import at_interrupt
from ascend_setup.utils.paths import CANN_HOME, VENV, check_path_length, resolve_workdir

SIMULATED = "[simulated]"
AUTO = -1  # --max-model-len auto: vLLM picks the largest that fits
DEFAULT_CARD = "910B3"


def model_dir(model: str) -> Path:
    """A local directory, or where `model fetch` put a hub id."""
    path = Path(model).expanduser()
    check_path_length(path.absolute(), "MODEL")
    if not path.exists() and MODEL_ID.match(model):
        from ascend_setup.commands.model import default_dest

        path = default_dest(model)
        if not path.exists():
            raise BadInput(
                f"MODEL {model} has not been fetched (not in {path})",
                hint=f"'ascend-setup model fetch {model}' first, or give the model's directory",
            )
    if not path.is_dir():
        raise BadInput(f"MODEL {path.absolute()} is not a model directory", hint="give the directory of config.json")
    if not (path / "config.json").is_file():
        raise BadInput(f"MODEL {path.absolute()} has no config.json", hint="give the directory of a model's files")
    return path.absolute()


def server_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", path.name).strip("-.") or "model"


def choose_cards(args: argparse.Namespace, present: Optional[int]) -> List[int]:
    """--card N[,M...], else the first --tp cards; more than the host has is bad input."""
    if args.card:
        try:
            cards = [int(c) for c in args.card.split(",")]
        except ValueError:
            raise BadInput(f"--card {args.card!r} is not a card index or a list of them (0 or 0,1)") from None
        if len(set(cards)) != len(cards) or min(cards) < 0:
            raise BadInput(f"--card {args.card!r} names a card twice or a negative index")
        if args.tp is not None and args.tp != len(cards):
            raise BadInput(f"--tp {args.tp} and --card {args.card} disagree: one card per tensor-parallel rank")
    else:
        cards = list(range(args.tp or 1))
    if present is not None and (len(cards) > present or max(cards) >= present):
        raise BadInput(
            f"{'--tp ' + str(len(cards)) if not args.card else '--card ' + args.card} asks for more cards "
            f"than npu-smi shows here ({present})"
        )
    return cards


def card_of(chips: List[Dict[str, str]]) -> Tuple[Card, str]:
    """fit's card for the chip npu-smi names; the 910B3's figures, said so, when it names none fit knows."""
    name = chips[0]["name"] if chips else None
    if name:
        try:
            return card_for(name), f"npu-smi: {name}"
        except BadInput:
            pass
    return card_for(DEFAULT_CARD), f"the card is {name or 'unknown (no npu-smi)'}: {DEFAULT_CARD} figures assumed"


class Context:
    """Everything serve learns before it starts anything."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.model = model_dir(args.model)
        self.name = server_name(self.model)
        self.files: ModelFiles = local_files(self.model)
        self.workdir = resolve_workdir(args.workdir, mode="read" if args.dry_run else "write")
        self.venv = VENV.path(args.venv)[0] or Workdir(self.workdir).venv
        cann_home = CANN_HOME.value(args.cann_home)[0]
        self.cann = primary_cann(cann_home)
        self.env = (
            capture_env(self.cann.set_env_scripts()).apply() if self.cann and self.cann.set_env else dict(os.environ)
        )
        self.npu = host_npu(cann_home)
        self.cards = choose_cards(args, len(self.npu.chips) if self.npu.npu_smi and not self.npu.error else None)
        self.card, self.card_source = card_of(self.npu.chips)
        self.row = row_for(load_matrix(args.matrix), None, self.cann)
        self.facts: Optional[VenvFacts] = None
        if read_pyvenv_cfg(self.venv) is not None and venv_python(self.venv).exists():
            self.facts = venv_facts(venv_python(self.venv), self.env)
        elif not args.dry_run:
            raise BadInput(
                f"--venv {self.venv} is not a working venv",
                hint="run 'ascend-setup install' first, or pass the venv it made with --venv",
            )
        self.plugin = (self.facts.versions.get("vllm-ascend") if self.facts else None) or self.row.packages[
            "vllm-ascend"
        ]

    def fit(self, context: int, user: UserArgs) -> Fit:
        bandwidth = probed_bandwidth(self.workdir)
        return estimate(
            self.files,
            self.card,
            self.row,
            context=context,
            utilisation=self.args.gpu_memory_utilization,
            kv_dtype="bf16",
            bandwidth=bandwidth,
            bandwidth_source="probe" if bandwidth else "card-table",
            tp=len(self.cards),
            serving=user.serving(),
        )

    def plan(self) -> Tuple[ServePlan, Fit]:
        config = self.files.config
        user = UserArgs.read(self.args.vllm_args)
        fit = self.fit(int(config.get("max_position_embeddings") or 32768), user)
        if fit.blockers:
            raise AscendSetupError(
                f"serve {self.name} refused: {fit.blockers[0]}", hint="'ascend-setup fit' shows the figures"
            )
        given = user.given.get("max_model_len") or self.args.max_model_len
        length, why = choose_max_model_len(fit, config, self.args.concurrency, None if given == AUTO else given)
        found = traits(config, self.files.quant_description)
        plan = compose(
            name=self.name,
            model=self.model,
            vllm=self.venv / "bin" / "vllm",
            fit=fit,
            config=config,
            found=found,
            families=families_for(found, self.plugin, len(self.cards)),
            plugin=self.plugin,
            port=self.args.port,
            cards=self.cards,
            max_model_len=length,
            why_len=why,
            concurrency=self.args.concurrency,
            utilisation=self.args.gpu_memory_utilization,
            user=user,
            unneeded=self.unneeded_hints(),
        )
        plan.set_env = [str(s) for s in self.cann.set_env_scripts()] if self.cann and self.cann.set_env else []
        return plan, fit

    def unneeded_hints(self) -> List[RuntimeHint]:
        """The row's hints needed only without Triton, on a venv whose HAS_TRITON is True (unknown: all kept)."""
        if self.facts is None or self.facts.has_triton is not True:
            return []
        return [h for h in self.row.hints() if h.only_without_triton]

    def validate(self, plan: ServePlan) -> Tuple[bool, List[str]]:
        """Against the installed plugin's source: (validated, warnings); not validated when there is no venv to
        read it from (dry run only)."""
        if self.facts is None or self.facts.plugin_dir is None:
            if not self.args.dry_run:
                raise AscendSetupError(f"vllm-ascend is not installed in {self.venv}", hint="ascend-setup install")
            return False, []
        keys = installed_keys(self.facts.plugin_dir, self.plugin)
        config = config_object(read_command(plan.argv[2:]).get(CONFIG), "in the composed command")
        return True, check_against(keys, config=config, env=plan.environment, user_env=os.environ)


def run(args: argparse.Namespace, output: Output) -> int:
    if args.model in ("status", "stop"):
        return _status(args, output) if args.model == "status" else _stop(args, output)
    ctx = Context(args)
    plan, fit = ctx.plan()
    if not args.dry_run:
        records.refuse_second(ctx.workdir, ctx.name, args.port, ctx.cards)  # ours: exit 3, before "in use"
        check_port(args.port)
    validated, warnings = ctx.validate(plan)
    versions = version_verdicts(ctx.row, ctx.facts) if ctx.facts else []
    if args.dry_run:
        return _dry_run(args, output, ctx, plan, validated, versions, warnings)
    assert ctx.facts is not None
    for note in [v.note for v in versions if v.note] + warnings:
        stderr_console().print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)
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
    return _serve(args, output, ctx, plan, fit)


def _dry_run(
    args: argparse.Namespace,
    output: Output,
    ctx: Context,
    plan: ServePlan,
    validated: bool,
    versions: List[PinVerdict],
    warnings: List[str],
) -> int:
    """The script, and what preflight's version check finds in the venv (a refusal is said, not raised: nothing
    starts)."""
    note = None if validated else f"not validated: no vllm-ascend installed in {ctx.venv} to read its keys from"
    said = [("" if v.accepted else "preflight would refuse: ") + v.said() for v in versions]
    if args.json:
        output.print_json(
            {
                **plan.to_json(),
                "validated": validated,
                "note": note,
                "card": ctx.card.name,
                "card_source": ctx.card_source,
                "warnings": warnings,
                "versions": [
                    {"name": v.name, "found": v.found, "pin": v.pin, "accepted": v.accepted, "note": v.said()}
                    for v in versions
                ],
            }
        )
        return 0
    out = stdout_console()
    for line in (
        [f"# version: {s}" for s in said]
        + [f"# warning: {w}" for w in warnings]
        + plan.script()
        + ([f"# {note}"] if note else [])
    ):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    return 0


def _serve(args: argparse.Namespace, output: Output, ctx: Context, plan: ServePlan, fit: Fit) -> int:
    err = stderr_console()
    log = records.serve_dir(ctx.workdir) / f"{ctx.name}.log"
    records.serve_dir(ctx.workdir).mkdir(parents=True, exist_ok=True)
    offset = log.stat().st_size if log.exists() else 0  # this attempt's part of the log starts here
    proc, server = start(plan.argv, {**ctx.env, **plan.environment}, log, detach=args.detach)
    record = records.ServerRecord(
        name=ctx.name,
        pid=proc.pid,
        start_ticks=server.start_ticks,
        port=args.port,
        cards=ctx.cards,
        log=str(log),
        argv=plan.argv,
        detached=args.detach,
        started_at=time.time(),
        env=plan.environment,
        token=server.token,
    )
    records.save(ctx.workdir, record)

    def stop_it() -> None:
        stop_server(server, proc)
        records.remove(ctx.workdir, ctx.name)

    if not args.detach:
        at_interrupt(stop_it)
    base = f"http://127.0.0.1:{args.port}"
    deadline = args.ready_timeout or deadline_seconds(fit.weights_per_card_bytes, plan.graph_mode)  # weights' size
    reporter = PhaseReporter(err)
    reporter.starting(
        f"serve {ctx.name}",
        FIRST_RUN,
        f"vllm serve on card {','.join(map(str, ctx.cards))}, port {args.port}, ready within {deadline:.0f} s",
        log,
    )
    try:
        seconds = wait_ready(
            proc,
            server,
            base=base,
            name=plan.served_name,
            log=log,
            offset=offset,
            deadline=deadline,
            on_line=reporter.activity,
        )
    except AscendSetupError:
        reporter.failed(f"serve {ctx.name}", "")
        records.remove(ctx.workdir, ctx.name)
        raise
    reporter.finished(f"serve {ctx.name} ready", seconds)
    simulated = served(base, plan.served_name) and _simulated(base)
    try:
        warm_up(base, plan.served_name)
        answer = chat(base, plan.served_name)
        measurement = measure(base, plan.served_name, max_tokens=args.measure_tokens)
    except RequestFailed as exc:
        end = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < end:  # a crash on the request: let the log end
            time.sleep(0.2)
        stop_it()
        raise triaged_failure(f"the first requests failed ({exc})", log, ctx.name, offset) from None
    point = SpeedPoint(
        card=ctx.card.name,
        cann=ctx.row.cann,
        tp=len(ctx.cards),
        graph_mode=plan.graph_mode,
        model=ctx.name,
        tok_s=measurement.tok_s,
        measured_at=now_utc(),
        bytes_per_token=bytes_per_token(ctx.files, context=args.measure_tokens, tp=len(ctx.cards)),
    )
    judged = judge(point, ctx.card.decode, probed_bandwidth(ctx.workdir) or ctx.card.peak_gbps)
    assert ctx.facts is not None  # run() refused a venv without them before anything started
    if not simulated:  # this host's speed, for fit's calibration; a simulated card teaches nothing about a real one
        record_point(point)
    result = write_result(
        records.serve_dir(ctx.workdir) / f"{ctx.name}.json",
        card=ctx.card.name,
        cann=ctx.row.cann,
        tp=len(ctx.cards),
        graph_mode=plan.graph_mode,
        model=ctx.name,
        bytes_per_token=round(point.bytes_per_token),
        measurement=measurement,
        predicted=fit.decode_tok_s,
        plan=plan.to_json(),
        versions=dict(ctx.facts.versions),
        simulated=simulated,
    )
    label = f"{SIMULATED} " if simulated else ""
    ratio = f" = {result['ratio']:.2f} x fit's {fit.decode_tok_s:.1f} tok/s" if result["ratio"] else ""
    m = measurement
    figures = (
        f"{label}{ctx.name} ready in {seconds:.1f} s; smoke answer: {answer!r}; TTFT {m.ttft_s * 1000:.0f} ms "
        f"(a fresh prefix: a real prefill), TPOT {m.tpot_ms:.1f} ms (p90 {m.tpot_p90_ms:.1f}), ITL "
        f"{m.itl_ms:.1f} ms (p90 {m.itl_p90_ms:.1f}), E2EL {m.e2el_s:.2f} s, decode {m.tok_s:.1f} tok/s "
        f"(medians of {len(m.runs)}, as vllm bench serve defines them){ratio}"
        + ("" if plan.graph_mode else "; eager mode: not a speed to judge")
        + (f"; launch-bound, not bandwidth-bound: {judged.why}" if judged.bound == "launch" else "")
    )
    record.figures = figures
    records.save(ctx.workdir, record)
    summary = {
        **result,
        "bound": judged.bound,
        "recorded": not simulated,
        "name": ctx.name,
        "url": base,
        "pid": proc.pid,
        "log": str(log),
        "answer": answer,
        "ready_seconds": round(seconds, 1),
        "detached": args.detach,
        "served_name": plan.served_name,
        "host": plan.host,
        "exposed": exposed(plan.host),
    }
    if args.json:
        output.print_json(summary)
    else:
        stdout_console().print(figures, soft_wrap=True, markup=False, highlight=False)
    if args.detach:
        err.print(
            f"serving {ctx.name} at {base} (pid {proc.pid}, log {log}); 'ascend-setup serve stop {ctx.name}' stops it",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
        if exposed(plan.host):
            err.print(
                f"note: it listens on {plan.host or 'every interface'} (your --host), not only on loopback: "
                "its API asks for no key, and it stays up after this command",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
        return 0
    err.print(
        f"serving {ctx.name} at {base} (log {log}); Ctrl-C stops it", soft_wrap=True, markup=False, highlight=False
    )
    code = proc.wait()
    stop_it()
    if code in (0, -signal.SIGTERM):  # stopped from outside ('serve stop', a SIGTERM to it): a clean end
        err.print(f"{ctx.name} stopped (status {code})", markup=False, highlight=False)
        return 0
    raise triaged_failure(f"vllm serve exited with status {code}", log, ctx.name, offset)


def exposed(host: Optional[str]) -> bool:
    """Whether vLLM binds more than loopback (no --host: every interface)."""
    import ipaddress

    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host or "0.0.0.0").is_loopback
    except ValueError:
        return True  # a host name: whatever it resolves to


def _simulated(base: str) -> bool:
    """The stub vllm of the simulated host says so in /v1/models (owned_by)."""
    from ascend_setup.serve.run import http_get

    return b"(simulated)" in (http_get(f"{base}/v1/models") or b"")


def _gone_cause(log: str) -> Optional[Dict[str, Any]]:
    """Why a recorded server is gone: the triage of its log's last start (None when the log is unreadable)."""
    from ascend_setup.knowledge.scan import triage_stream
    from ascend_setup.utils.inputs import open_input

    try:
        with open_input(Path(log), "log", follow=False) as handle:
            diagnosis = triage_stream(handle)
    except BadInput:
        return None
    return (
        None
        if diagnosis is None
        else {"id": diagnosis.id, "cause": diagnosis.cause, "fix": diagnosis.fix, "line_number": diagnosis.line_number}
    )


def _status(args: argparse.Namespace, output: Output) -> int:
    workdir = resolve_workdir(args.workdir, mode="read")
    rows = [{**row, "cause": None if row["running"] else _gone_cause(row["log"])} for row in status(workdir)]
    if args.json:
        output.print_json({"servers": rows})
        return 0
    out = stdout_console()
    if not rows:
        out.print(f"no server was started from {workdir}", soft_wrap=True, markup=False)
    for row in rows:
        state = "running" if row["running"] else "gone"
        out.print(
            terminal_safe(
                f"{row['name']}: {state}, pid {row['pid']}, port {row['port']}, card "
                f"{','.join(map(str, row['cards']))}, log {row['log']}"
            )  # a record's text
            + (f"\n  {terminal_safe(row['figures'])}" if row["figures"] else "")
            + (
                f"\n  cause (log line {row['cause']['line_number']}): {terminal_safe(row['cause']['cause'])}"
                + (f"\n  fix: {terminal_safe(row['cause']['fix'])}" if row["cause"]["fix"] else "")
                if row["cause"]
                else ""
            ),
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
    return 0


def _stop(args: argparse.Namespace, output: Output) -> int:
    workdir = resolve_workdir(args.workdir, mode="read")
    names: List[Any] = list(args.vllm_args)
    if len(names) > 1:
        raise BadInput("serve stop takes one NAME at most")
    stopped, running = stop_recorded(workdir, names[0] if names else None)
    if args.json:
        output.print_json({"stopped": stopped.name, "pid": stopped.pid, "was_running": running})
    else:
        stdout_console().print(
            f"stopped {stopped.name} (pid {stopped.pid}, and its process group)"
            if running
            else f"{stopped.name} (pid {stopped.pid}) was no longer running; its record is removed",
            markup=False,
        )
    return 0


def serve_arguments(p: argparse.ArgumentParser) -> None:
    """`serve MODEL [-- ARGS]`; MODEL `status` or `stop [NAME]` reports on or stops a recorded server."""
    flags.common(p)
    p.add_argument(
        "model",
        metavar="MODEL|status|stop",
        help="a model directory, or a hub id that 'model fetch' "
        "fetched; 'status' lists the servers started from the workdir; 'stop [NAME]' stops one",
    )
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
    p.set_defaults(func=run)


ARGUMENTS = {"serve": serve_arguments}
