"""The state file: what each step did, written atomically after every transition."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Final, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_setup.errors import BadInput
from ascend_setup.utils.files import atomic_write_text
from ascend_setup.utils.inputs import load_json

STATE_VERSION: Final = 1
StepStatus = Literal["started", "done", "failed"]


class StepRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: StepStatus
    fingerprint: str
    inputs: Dict[str, Any] = Field(default_factory=dict)
    started_at: float
    ended_at: Optional[float] = None
    log: str
    error: Optional[str] = None
    outputs: Dict[str, Any] = Field(default_factory=dict)

    @property
    def seconds(self) -> Optional[float]:
        return None if self.ended_at is None else round(self.ended_at - self.started_at, 3)


class RunState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str  # whose state file this is (the store refuses another's)
    version: Literal[1] = STATE_VERSION
    options: Dict[str, Any] = Field(default_factory=dict)  # what the run was asked, replayed by a resume
    steps: Dict[str, StepRecord] = Field(default_factory=dict)


class StateStore:
    """Reads and writes a run's state file; never overwrites a file it cannot understand.

    `format` names the tool that writes it; `check_options` checks the recorded options a resume replays (a
    hand-edited value must fail at load, not deep inside a step); `elsewhere` is the hint's other way out."""

    def __init__(
        self,
        path: Path,
        *,
        format: str = "engine-state",
        writer: str = "this tool",
        check_options: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
        elsewhere: str = "use another directory",
    ) -> None:
        self.path = path
        self.format = format
        self.writer = writer
        self.check_options = check_options
        self.elsewhere = elsewhere

    def empty(self) -> RunState:
        return RunState(format=self.format)

    def load(self) -> RunState:
        if not os.path.lexists(self.path):
            return self.empty()
        hint = f"move it aside (mv {self.path} {self.path}.bad) to start over, or {self.elsewhere}"
        data = load_json(self.path, "state", follow=False, hint=hint)  # a link here is not the tool's state
        if not isinstance(data, dict) or data.get("format") != self.format:
            raise BadInput(f"state file {self.path} was not written by {self.writer}", hint=hint)
        where: Tuple[str, ...] = ()
        try:
            state = RunState.model_validate(data)
            if self.check_options is not None:
                where = ("options",)
                state.options = self.check_options(state.options)
            return state
        except ValidationError as exc:
            first = exc.errors()[0]
            at = ".".join(str(p) for p in (*where, *first["loc"]))
            raise BadInput(f"state file {self.path} is invalid at {at}: {first['msg']}", hint=hint) from None

    def save(self, state: RunState) -> None:
        atomic_write_text(self.path, json.dumps(state.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")

    def mark(self, state: RunState, name: str, record: StepRecord) -> None:
        """Record one transition and persist it before anything else happens."""
        state.steps[name] = record
        self.save(state)


def now() -> float:
    return time.time()
