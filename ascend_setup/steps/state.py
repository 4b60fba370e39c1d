"""state.json: what each step did, written atomically after every transition."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_setup.errors import BadInput
from ascend_setup.fsutil import atomic_write_text, read_regular_text

STATE_FORMAT = "ascend-setup-state"
STATE_VERSION = 1
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

    format: Literal["ascend-setup-state"] = STATE_FORMAT
    version: Literal[1] = STATE_VERSION
    options: Dict[str, Any] = Field(default_factory=dict)
    steps: Dict[str, StepRecord] = Field(default_factory=dict)


class StateStore:
    """Reads and writes `<workdir>/state.json`; never overwrites a file it cannot understand."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> RunState:
        try:
            text = read_regular_text(self.path)
        except FileNotFoundError:
            return RunState()
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"state file {self.path} cannot be read: {getattr(exc, 'strerror', None) or exc}",
                           hint="move it aside to start over, or pass another --workdir") from None
        hint = f"move it aside (mv {self.path} {self.path}.bad) to start over, or pass another --workdir"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInput(f"state file {self.path} is corrupt (line {exc.lineno}: {exc.msg})", hint=hint) from None
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            raise BadInput(f"state file {self.path} was not written by ascend-setup", hint=hint)
        try:
            return RunState.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise BadInput(f"state file {self.path} is invalid at {where}: {first['msg']}", hint=hint) from None

    def save(self, state: RunState) -> None:
        atomic_write_text(self.path, json.dumps(state.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")

    def mark(self, state: RunState, name: str, record: StepRecord) -> None:
        """Record one transition and persist it before anything else happens."""
        state.steps[name] = record
        self.save(state)


def now() -> float:
    return time.time()
