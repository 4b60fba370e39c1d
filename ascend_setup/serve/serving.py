"""`serve MODEL` from a composed command to a measured server: started with its record, waited for, smoke-tested,
measured (the speed recorded for fit's calibration unless the card is simulated), and, in the foreground,
waited on until it ends. What is shown while it happens goes through the `Reporter` the command passes."""

from __future__ import annotations

import ipaddress
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Protocol, Tuple

from ascend_setup.engine.runner import FIRST_RUN
from ascend_setup.errors import AscendSetupError
from ascend_setup.fit.calibration import SpeedPoint, judge, now_utc, record_point
from ascend_setup.fit.decode import bytes_per_token
from ascend_setup.fit.estimate import Fit
from ascend_setup.serve import server_records as records
from ascend_setup.serve.compose import ServePlan
from ascend_setup.serve.context import Context
from ascend_setup.serve.measure import Measurement, measure, write_result
from ascend_setup.serve.run import deadline_seconds, http_get, served, start, stop_server, triaged_failure, wait_ready
from ascend_setup.serve.smoke import RequestFailed, chat, warm_up
from ascend_setup.utils.interrupts import at_interrupt
from ascend_setup.utils.procs import Started

SIMULATED = "[simulated]"


class Reporter(Protocol):
    """How the start-up shows on a terminal (cli.progress.PhaseReporter)."""

    def starting(self, name: str, reason: str, description: str, log: Optional[Path] = None) -> None: ...
    def activity(self, line: str) -> None: ...
    def failed(self, name: str, message: str) -> None: ...
    def finished(self, name: str, seconds: float) -> None: ...


@dataclass
class Launched:
    """A server started: its process, its proof of identity, its record, and where this attempt's log begins."""

    proc: subprocess.Popen[bytes]
    server: Started
    record: records.ServerRecord
    log: Path
    offset: int
    base: str

    def stop(self, workdir: Path) -> None:
        stop_server(self.server, self.proc)
        records.remove(workdir, self.record.name)


@dataclass
class Served:
    """A server that answered and was measured: serve's document and its one line of figures."""

    summary: Dict[str, Any]
    figures: str
    launched: Launched


def exposed(host: Optional[str]) -> bool:
    """Whether vLLM binds more than loopback (no --host: every interface)."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host or "0.0.0.0").is_loopback
    except ValueError:
        return True  # a host name: whatever it resolves to


def simulated(base: str) -> bool:
    """The stub vllm of the simulated host says so in /v1/models (owned_by)."""
    return b"(simulated)" in (http_get(f"{base}/v1/models") or b"")


def launch(ctx: Context, composed: ServePlan) -> Launched:
    """The server started and recorded (a foreground one stopped by this tool's interrupt)."""
    settings = ctx.settings
    folder = records.serve_dir(ctx.workdir)
    log = folder / f"{ctx.name}.log"
    folder.mkdir(parents=True, exist_ok=True)
    offset = log.stat().st_size if log.exists() else 0  # this attempt's part of the log starts here
    proc, server = start(composed.argv, {**ctx.env, **composed.environment}, log, detach=settings.detach)
    record = records.ServerRecord(
        name=ctx.name,
        pid=proc.pid,
        start_ticks=server.start_ticks,
        port=settings.port,
        cards=ctx.cards,
        log=str(log),
        argv=composed.argv,
        detached=settings.detach,
        started_at=time.time(),
        env=composed.environment,
        token=server.token,
    )
    records.save(ctx.workdir, record)
    launched = Launched(proc, server, record, log, offset, f"http://127.0.0.1:{settings.port}")
    if not settings.detach:
        at_interrupt(lambda: launched.stop(ctx.workdir))
    return launched


def ready(ctx: Context, composed: ServePlan, fit: Fit, launched: Launched, reporter: Reporter) -> float:
    """Seconds until the server answers, within a deadline from the weights' size; its record gone if it fails."""
    settings = ctx.settings
    deadline = settings.ready_timeout or deadline_seconds(fit.weights_per_card_bytes, composed.graph_mode)
    reporter.starting(
        f"serve {ctx.name}",
        FIRST_RUN,
        f"vllm serve on card {','.join(map(str, ctx.cards))}, port {settings.port}, ready within {deadline:.0f} s",
        launched.log,
    )
    try:
        seconds = wait_ready(
            launched.proc,
            launched.server,
            base=launched.base,
            name=composed.served_name,
            log=launched.log,
            offset=launched.offset,
            deadline=deadline,
            on_line=reporter.activity,
        )
    except AscendSetupError:
        reporter.failed(f"serve {ctx.name}", "")
        records.remove(ctx.workdir, ctx.name)
        raise
    reporter.finished(f"serve {ctx.name} ready", seconds)
    return seconds


def first_requests(ctx: Context, composed: ServePlan, launched: Launched) -> Tuple[str, Measurement]:
    """The warm-up, the smoke answer and the measurement; a failure stops the server and is triaged."""
    try:
        warm_up(launched.base, composed.served_name)
        answer = chat(launched.base, composed.served_name)
        return answer, measure(launched.base, composed.served_name, max_tokens=ctx.settings.measure_tokens)
    except RequestFailed as exc:
        end = time.monotonic() + 10
        while launched.proc.poll() is None and time.monotonic() < end:  # a crash on the request: let the log end
            time.sleep(0.2)
        launched.stop(ctx.workdir)
        raise triaged_failure(
            f"the first requests failed ({exc})", launched.log, launched.offset, prefix=f"serve {ctx.name}: "
        ) from None


def figures_line(
    ctx: Context, composed: ServePlan, fit: Fit, seconds: float, answer: str, m: Measurement, how: Dict[str, Any]
) -> str:
    """serve's one line of figures, as vllm bench serve defines them."""
    label = f"{SIMULATED} " if how["simulated"] else ""
    ratio = f" = {how['ratio']:.2f} x fit's {fit.decode_tok_s:.1f} tok/s" if how["ratio"] else ""
    return (
        f"{label}{ctx.name} ready in {seconds:.1f} s; smoke answer: {answer!r}; TTFT {m.ttft_s * 1000:.0f} ms "
        f"(a fresh prefix: a real prefill), TPOT {m.tpot_ms:.1f} ms (p90 {m.tpot_p90_ms:.1f}), ITL "
        f"{m.itl_ms:.1f} ms (p90 {m.itl_p90_ms:.1f}), E2EL {m.e2el_s:.2f} s, decode {m.tok_s:.1f} tok/s "
        f"(medians of {len(m.runs)}, as vllm bench serve defines them){ratio}"
        + ("" if composed.graph_mode else "; eager mode: not a speed to judge")
        + (f"; launch-bound, not bandwidth-bound: {how['why']}" if how["bound"] == "launch" else "")
    )


def serve(ctx: Context, composed: ServePlan, fit: Fit, reporter: Reporter) -> Served:
    """Start, wait, smoke-test and measure; the figures written beside the log and into the server's record."""
    launched = launch(ctx, composed)
    seconds = ready(ctx, composed, fit, launched, reporter)
    is_simulated = served(launched.base, composed.served_name) and simulated(launched.base)
    answer, measurement = first_requests(ctx, composed, launched)
    tp = len(ctx.cards)
    point = SpeedPoint(
        card=ctx.card.name,
        cann=ctx.row.cann,
        tp=tp,
        graph_mode=composed.graph_mode,
        model=ctx.name,
        tok_s=measurement.tok_s,
        measured_at=now_utc(),
        bytes_per_token=bytes_per_token(ctx.files, context=ctx.settings.measure_tokens, tp=tp),
    )
    judged = judge(point, ctx.card.decode, ctx.bandwidth or ctx.card.peak_gbps)
    assert ctx.facts is not None  # a venv without them was refused before anything started
    if not is_simulated:  # this host's speed, for fit's calibration; a simulated card teaches nothing about a real one
        record_point(point)
    result = write_result(
        records.serve_dir(ctx.workdir) / f"{ctx.name}.json",
        card=ctx.card.name,
        cann=ctx.row.cann,
        tp=tp,
        graph_mode=composed.graph_mode,
        model=ctx.name,
        bytes_per_token=round(point.bytes_per_token),
        measurement=measurement,
        predicted=fit.decode_tok_s,
        plan=composed.to_json(),
        versions=dict(ctx.facts.versions),
        simulated=is_simulated,
    )
    how = {"simulated": is_simulated, "ratio": result["ratio"], "bound": judged.bound, "why": judged.why}
    figures = figures_line(ctx, composed, fit, seconds, answer, measurement, how)
    launched.record.figures = figures
    records.save(ctx.workdir, launched.record)
    summary = {
        **result,
        "bound": judged.bound,
        "recorded": not is_simulated,
        "name": ctx.name,
        "url": launched.base,
        "pid": launched.proc.pid,
        "log": str(launched.log),
        "answer": answer,
        "ready_seconds": round(seconds, 1),
        "detached": ctx.settings.detach,
        "served_name": composed.served_name,
        "host": composed.host,
        "exposed": exposed(composed.host),
    }
    return Served(summary, figures, launched)


def until_it_ends(ctx: Context, launched: Launched, say: Callable[[str], None]) -> None:
    """In the foreground: wait for the server; a stop from outside ('serve stop', a SIGTERM) is a clean end, any
    other exit is triaged from this attempt's log."""
    code = launched.proc.wait()
    launched.stop(ctx.workdir)
    if code in (0, -signal.SIGTERM):
        say(f"{ctx.name} stopped (status {code})")
        return
    raise triaged_failure(
        f"vllm serve exited with status {code}", launched.log, launched.offset, prefix=f"serve {ctx.name}: "
    )
