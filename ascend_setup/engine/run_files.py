"""The engine's own files in a run's directory: the state, the run lock and one log per step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunFiles:
    """Where a run keeps what the engine writes (`root` on a disk that survives a stop)."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def run_lock(self) -> Path:
        """The flock one run holds (see runlock.py)."""
        return self.root / "run.lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log(self, step_name: str) -> Path:
        return self.logs / f"{step_name}.log"
