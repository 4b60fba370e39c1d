"""state.json: what each step did, written atomically after every transition."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from ascend_setup.errors import BadInput
from ascend_setup.fsutil import atomic_write_text
from ascend_setup.inputs import load_json
from ascend_setup.matrix.models import ExactVersion, IndexUrl, index_url_value

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

    @field_validator("options")
    @classmethod
    def _recorded_options(cls, options: Dict[str, Any]) -> Dict[str, Any]:
        """`resume` replays these: a hand-edited installer or index must fail here, not inside pip."""
        return {**options, **_RecordedOptions.model_validate(options).model_dump(exclude_unset=True)}


def _mirror(value: object) -> str:
    return str(value) if value in ("auto", "none") else index_url_value(value)


class _RecordedOptions(BaseModel):
    """The recorded options whose values are more than strings (the rest are checked as flags on replay)."""

    model_config = ConfigDict(extra="ignore")

    cann: Optional[ExactVersion] = None
    installer: Optional[Literal["pip", "uv"]] = None
    mirror: Optional[Annotated[str, BeforeValidator(_mirror)]] = None
    index_url: Optional[IndexUrl] = None
    extra_index_urls: List[IndexUrl] = Field(default_factory=list)
    indexes: Dict[str, IndexUrl] = Field(default_factory=dict)


class StateStore:
    """Reads and writes `<workdir>/state.json`; never overwrites a file it cannot understand."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> RunState:
        if not os.path.lexists(self.path):
            return RunState()
        hint = f"move it aside (mv {self.path} {self.path}.bad) to start over, or pass another --workdir"
        data = load_json(self.path, "state", follow=False, hint=hint)  # a link here is not the tool's state
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
