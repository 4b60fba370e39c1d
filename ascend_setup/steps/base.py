"""What a step is: declared inputs, a check against the real world, and the work itself."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple

from rich.console import Console


@dataclass
class Context:
    """Everything a step may read: the workdir, the recorded options, earlier steps' outputs."""

    workdir: Path
    options: Mapping[str, Any] = field(default_factory=dict)
    console: Console = field(default_factory=lambda: Console(stderr=True))
    outputs: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    extras: Dict[str, Any] = field(default_factory=dict)

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def log_path(self, step_name: str) -> Path:
        return self.log_dir / f"{step_name}.log"

    def output(self, step_name: str, key: str) -> Any:
        """A value an earlier step recorded when it finished (survives restarts via state.json)."""
        return self.outputs[step_name][key]


class Step:
    """A unit of the pipeline. Subclasses set `name`, may set `depends_on`, and implement the rest.

    `is_done` must look at the world (installed versions, files, hashes): a marker alone lies.
    `run` must cope with its own partial output, because a SIGKILL can stop it anywhere.
    """

    name: ClassVar[str]
    depends_on: ClassVar[Tuple[str, ...]] = ()

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        """JSON-able values that, when changed, make this step (and its dependents) run again."""
        return {}

    def is_done(self, ctx: Context) -> bool:
        raise NotImplementedError

    def why_not_done(self, ctx: Context) -> str:
        """Why `is_done` said no, for the reason a rerun prints (steps with a richer check override it)."""
        return "the check no longer holds"

    def run(self, ctx: Context, log: Path) -> Optional[Dict[str, Any]]:
        """Do the work; return outputs later steps read with `ctx.output(name, key)`."""
        raise NotImplementedError

    def repair_interrupted(self, ctx: Context, log: Path) -> None:
        """Called before `run` when the last run of this step stopped mid-way (recorded `started` or
        `failed`): check what it was writing and repair it, since `is_done`'s cheap check may trust a
        half-written file. Not called for a step recorded `done`, so a clean rerun pays nothing."""

    def describe(self, ctx: Context) -> str:
        doc = (type(self).__doc__ or self.name).strip()
        return doc.splitlines()[0]


def fingerprint(inputs: Mapping[str, Any], upstream: Tuple[str, ...] = ()) -> str:
    """A stable hash of a step's inputs and its dependencies' fingerprints."""
    payload = json.dumps({"inputs": inputs, "upstream": list(upstream)}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
