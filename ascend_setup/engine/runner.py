"""The resumable engine: decide per step from state + the real world, persist every transition."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Generic, List, Optional, Protocol, Sequence, Tuple, TypeVar

from pydantic import BaseModel, ValidationError

from ascend_setup.engine.runlock import RunLock
from ascend_setup.engine.session import Session
from ascend_setup.engine.state import RunState, StateStore, StepRecord, now
from ascend_setup.engine.step import Step, fingerprint
from ascend_setup.errors import AscendSetupError, BadInput, StepFailed
from ascend_setup.utils.diskfull import disk_full, is_enospc
from ascend_setup.utils.files import make_dir, open_append
from ascend_setup.utils.redact import redact

#: The reason a step runs when no run has recorded it: the usual case, which the live lines leave unsaid.
FIRST_RUN = "not run yet"


@dataclass(frozen=True)
class Decision:
    """Whether a step runs this time, and the reason a user would want to read."""

    step: Step[BaseModel]
    run: bool
    reason: str
    fingerprint: str
    inputs: Dict[str, Any]
    interrupted: bool = False  # recorded started/failed: the step checks its partial output first


class Reporter(Protocol):
    def skipped(self, name: str, reason: str) -> None: ...

    def starting(self, name: str, reason: str, description: str, log: Optional[Path] = None) -> None: ...

    def finished(self, name: str, seconds: float) -> None: ...

    def failed(self, name: str, message: str) -> None: ...


class SilentReporter:
    def skipped(self, name: str, reason: str) -> None:
        pass

    def starting(self, name: str, reason: str, description: str, log: Optional[Path] = None) -> None:
        pass

    def finished(self, name: str, seconds: float) -> None:
        pass

    def failed(self, name: str, message: str) -> None:
        pass


def _changed_keys(old: Dict[str, Any], new: Dict[str, Any]) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys) or "a dependency changed"


S = TypeVar("S", bound=Session)


class Runner(Generic[S]):
    """Runs steps in order; any step can be killed at any second and the next run resumes. `S`: the session's
    class, which the command that made the runner reads back (an install's InstallSession)."""

    def __init__(
        self,
        steps: Sequence[Step[BaseModel]],
        session: S,
        store: Optional[StateStore] = None,
        run_lock: Optional[RunLock] = None,
    ) -> None:
        names: List[str] = []
        for step in steps:
            if step.name in names:
                raise ValueError(f"duplicate step {step.name}")
            missing = [d for d in step.depends_on if d not in names]
            if missing:
                raise ValueError(f"step {step.name} depends on {missing}, which do not come before it")
            names.append(step.name)
        self.steps = list(steps)
        self.session = session
        self.store = store or StateStore(session.files.state)
        self.run_lock = run_lock or RunLock(session.files.run_lock)
        self.ran: List[str] = []  # the steps this run started: a rerun that starts none changed nothing

    # -- deciding ------------------------------------------------------------------------------
    def _fingerprint(self, step: Step[BaseModel], known: Dict[str, str]) -> Tuple[str, Dict[str, Any]]:
        """Computed when the step's turn comes, so inputs may read outputs of steps that just ran."""
        inputs = step.inputs(self.session)
        fp = fingerprint(inputs, tuple(known[d] for d in step.depends_on))
        known[step.name] = fp
        return fp, inputs

    def _load_outputs(self, state: RunState) -> None:
        """What the finished steps recorded, read into their output models under the same keys. A record
        its model cannot read is left out, as if never recorded: the step's own check then finds it not done."""
        for step in self.steps:
            record = state.steps.get(step.name)
            if record is not None and record.state == "done" and step.name not in self.session.outputs:
                try:
                    self.session.outputs[step.name] = step.output_of(record.outputs)
                except ValidationError:
                    pass

    def _decide(self, step: Step[BaseModel], record: Optional[StepRecord], fp: str, inputs: Dict[str, Any]) -> Decision:
        def decision(run: bool, reason: str) -> Decision:
            return Decision(
                step, run, reason, fp, inputs, interrupted=record is not None and record.state in ("started", "failed")
            )

        if record is None:
            if step.is_done(self.session):
                return decision(False, "already satisfied")
            return decision(True, FIRST_RUN)
        if record.state == "started":
            return decision(True, "interrupted last time; running again")
        if record.state == "failed":
            return decision(True, "failed last time; running again")
        if record.fingerprint != fp:
            if record.inputs != inputs:
                return decision(True, f"inputs changed ({_changed_keys(record.inputs, inputs)})")
            return decision(True, f"a step it depends on changed ({', '.join(step.depends_on)})")
        if not step.is_done(self.session):
            return decision(True, f"recorded done, but {step.why_not_done(self.session)}")
        return decision(False, "done")

    def plan(self) -> List[Decision]:
        """What a run would do now, touching nothing (install --dry-run)."""
        state = self.store.load()
        self._load_outputs(state)
        known: Dict[str, str] = {}
        return [self._decide(step, state.steps.get(step.name), *self._fingerprint(step, known)) for step in self.steps]

    # -- running -------------------------------------------------------------------------------
    def run(self, reporter: Optional[Reporter] = None, options: Optional[Dict[str, Any]] = None) -> RunState:
        """Take the run lock, then run what is not done. State is saved after each transition; a full disk
        while saving it (or making the workdir) is one line, and the next run resumes."""
        try:
            return self._run(reporter, options)
        except OSError as exc:
            if not is_enospc(exc):
                raise
            raise disk_full(Path(exc.filename or self.session.root), "saving the install's state") from None

    def _run(self, reporter: Optional[Reporter], options: Optional[Dict[str, Any]]) -> RunState:
        reporter = reporter or SilentReporter()
        self.session.root.mkdir(parents=True, exist_ok=True)
        with self.run_lock:
            make_dir(self.session.files.logs)  # under the run lock: a refused run creates nothing
            state = self.store.load()
            if options is not None:
                state.options = dict(options)
                self.store.save(state)
            self._load_outputs(state)
            known: Dict[str, str] = {}
            for step in self.steps:
                fp, inputs = self._fingerprint(step, known)
                record = state.steps.get(step.name)
                d = self._decide(step, record, fp, inputs)
                if not d.run:
                    if record is None:  # satisfied by the world already: remember that
                        t = now()
                        self.store.mark(
                            state,
                            step.name,
                            StepRecord(
                                state="done",
                                fingerprint=fp,
                                inputs=inputs,
                                started_at=t,
                                ended_at=t,
                                log=str(self.session.files.log(step.name)),
                            ),
                        )
                    reporter.skipped(step.name, d.reason)
                    continue
                self._run_one(state, d, reporter)
            return state

    def _run_one(self, state: RunState, d: Decision, reporter: Reporter) -> None:
        step = d.step
        log = self.session.files.log(step.name)
        started = now()
        self.store.mark(
            state,
            step.name,
            StepRecord(state="started", fingerprint=d.fingerprint, inputs=d.inputs, started_at=started, log=str(log)),
        )
        reporter.starting(step.name, d.reason, step.describe(self.session), log)
        self.ran.append(step.name)
        try:
            try:
                with open_append(log) as handle:
                    handle.write(f"\n=== {step.name}: {d.reason} ===\n")
                if d.interrupted:
                    step.repair_interrupted(self.session, log)
                outputs = step.output_of(step.run(self.session, log))
            except OSError as exc:  # the step's own writes (extraction, a file it makes): one line, not a trace
                if not is_enospc(exc):
                    raise
                raise disk_full(Path(exc.filename or self.session.root), f"step {step.name}") from None
        except AscendSetupError as exc:
            self._fail(state, d, started, log, exc.one_line(), reporter)
            if isinstance(exc, BadInput):
                raise
            raise StepFailed(f"step {step.name} failed: {exc.message}", hint=exc.hint, details=exc.details) from None
        except Exception as exc:  # a step's own bug or an OS error: record it, then report it
            message = f"{type(exc).__name__}: {exc}"
            self._fail(state, d, started, log, message, reporter)
            raise StepFailed(f"step {step.name} failed: {message}", hint=f"see the log {log}") from None
        self.session.outputs[step.name] = outputs
        ended = now()
        self.store.mark(
            state,
            step.name,
            StepRecord(
                state="done",
                fingerprint=d.fingerprint,
                inputs=d.inputs,
                started_at=started,
                ended_at=ended,
                log=str(log),
                outputs=outputs.model_dump(mode="json", exclude_unset=True),
            ),
        )
        reporter.finished(step.name, ended - started)

    def _fail(self, state: RunState, d: Decision, started: float, log: Path, message: str, reporter: Reporter) -> None:
        try:
            self.store.mark(
                state,
                d.step.name,
                StepRecord(
                    state="failed",
                    fingerprint=d.fingerprint,
                    inputs=d.inputs,
                    started_at=started,
                    ended_at=now(),
                    log=str(log),
                    error=redact(message),
                ),
            )  # state.json keeps the options' URLs, never a message's
        except OSError as exc:  # a full disk: the step stays recorded `started`, which the next run repairs
            if not is_enospc(exc):
                raise
        reporter.failed(d.step.name, message)


def status_rows(
    steps: Sequence[Step[BaseModel]], state: RunState, running: Optional[int] = None
) -> List[Dict[str, Any]]:
    """One row per pipeline step for `status`: done, running (pid N), interrupted, failed or pending.
    A `started` step is running while a run holds the run lock (`running` is its pid), else it was interrupted."""
    rows = []
    for step in steps:
        rec = state.steps.get(step.name)
        shown: str = rec.state if rec else "pending"
        if shown == "started":
            shown = f"running (pid {running})" if running else "interrupted"
        rows.append(
            {
                "name": step.name,
                "state": shown,
                "seconds": rec.seconds if rec else None,
                "started_at": rec.started_at if rec else None,
                "log": rec.log if rec else None,
                "error": rec.error if rec else None,
            }
        )
    return rows
