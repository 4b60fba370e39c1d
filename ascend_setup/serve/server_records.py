"""The record of a server this tool started: `<workdir>/serve/<name>.server.json`, with its pid and the pid's
start time, so that `serve stop` and `serve status` find exactly that process (a pid alone may be reused), and
a second server on the same port or card is refused instead of raced."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional

from ascend_setup.errors import BadInput, LockHeld
from ascend_setup.utils.files import atomic_write_text, make_dir
from ascend_setup.utils.inputs import load_json
from ascend_setup.utils.procs import pid_alive
from ascend_setup.utils.procstat import start_ticks

SUFFIX = ".server.json"


@dataclass
class ServerRecord:
    name: str
    pid: int
    start_ticks: int
    port: int
    cards: List[int]
    log: str
    argv: List[str]
    detached: bool
    started_at: float
    figures: Optional[str] = None  # serve's result line, once measured
    env: dict = field(default_factory=dict)

    def alive(self) -> bool:
        """The very process that was started: same pid AND same start time (never by name)."""
        return pid_alive(self.pid, unknown=False) and start_ticks(self.pid) == self.start_ticks


def serve_dir(workdir: Path) -> Path:
    return workdir / "serve"


def record_path(workdir: Path, name: str) -> Path:
    return serve_dir(workdir) / f"{name}{SUFFIX}"


def save(workdir: Path, record: ServerRecord) -> Path:
    make_dir(serve_dir(workdir))
    path = record_path(workdir, record.name)
    atomic_write_text(path, json.dumps(asdict(record), indent=2) + "\n")
    return path


def load(path: Path) -> ServerRecord:
    data = load_json(path, "state", follow=False)
    try:
        return ServerRecord(**data)
    except TypeError:
        raise BadInput(f"server record {path} is not one serve wrote", hint="remove it if no server runs") from None


def records(workdir: Path) -> List[ServerRecord]:
    directory = serve_dir(workdir)
    return [load(p) for p in sorted(directory.glob(f"*{SUFFIX}"))] if directory.is_dir() else []


def remove(workdir: Path, name: str) -> None:
    try:
        record_path(workdir, name).unlink()
    except FileNotFoundError:
        pass


def refuse_second(workdir: Path, name: str, port: int, cards: List[int]) -> None:
    """Exit 3 when a server of ours still runs on this port or card (or under this name)."""
    for other in records(workdir):
        if not other.alive():
            continue
        shared = sorted(set(other.cards) & set(cards))
        if other.name == name or other.port == port or shared:
            what = (f"port {port}" if other.port == port else f"card {shared[0]}" if shared else f"name {name}")
            raise LockHeld(f"serve {other.name} (pid {other.pid}) already runs on {what}",
                           hint=f"'ascend-setup serve stop {other.name}' first, or pick another --port/--card")
