"""The record of a server this tool started: `<workdir>/serve/<name>.server.json`, with its pid, the pid's
start time and the run token put into the server's environment, so that `serve stop` and `serve status` find
exactly that process (a pid alone may be reused; utils/procs.Started proves it), and a second server on the
same port or card is refused instead of raced.

A record is input, like every file the tool reads: a bounded model checks it where it is read, its name is a
single file name (the record's own), and a record another user owns is read, never acted on."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints
from typing_extensions import Annotated

from ascend_setup.errors import BadInput, LockHeld
from ascend_setup.utils.files import atomic_write_text, make_dir
from ascend_setup.utils.inputs import FileName, Name, PathText, Prose, load_model, validate, visible
from ascend_setup.utils.procs import Started
from ascend_setup.utils.procstat import start_ticks

SUFFIX = ".server.json"
#: Linux's largest pid_max; a pid above 1: 1 and below are never a server of ours (kill(-1) is everyone).
PID_MAX = 4194304
Count = Annotated[int, Field(strict=True, ge=0, le=1024)]
#: A record's name is its file's name less SUFFIX, and the log's: short enough for any suffix within NAME_MAX.
RecordName = Annotated[FileName, StringConstraints(max_length=128)]
Token = Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{32}$")]


class ServerRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: RecordName
    pid: Annotated[int, Field(strict=True, gt=1, le=PID_MAX)]
    start_ticks: Annotated[int, Field(strict=True, ge=0, le=2**63)]
    port: Annotated[int, Field(strict=True, ge=1, le=65535)]
    cards: List[Count] = Field(max_length=1024)
    log: PathText
    argv: List[Prose] = Field(max_length=4096)
    detached: Annotated[bool, Field(strict=True)]
    started_at: Annotated[float, Field(strict=True, ge=0, le=1e11)]  # a time.time(): before the year 5000
    figures: Optional[Prose] = None  # serve's result line, once measured
    env: Dict[Name, Prose] = Field(default_factory=dict, max_length=4096)
    token: Optional[Token] = None  # the run token in the server's environment (absent: an older tool's record)
    _owners: Tuple[int, ...] = PrivateAttr(default=())  # the uids of the record's file and folder, when read

    @property
    def started(self) -> Started:
        return Started(self.pid, self.start_ticks, self.token)

    def alive(self) -> bool:
        """The very process that was started: same pid AND same start time (never by name). Stopping it asks
        for more (Started.refusal): this user's, carrying the run token, leading its group."""
        return self.started.running() and start_ticks(self.pid) == self.start_ticks

    def foreign_owner(self) -> Optional[int]:
        """The uid that owns this record's file or its folder when it is not the one running (the record is then
        read, never acted on: a record another user planted must not make root signal or delete anything)."""
        return next((uid for uid in self._owners if uid != os.geteuid()), None)


def serve_dir(workdir: Path) -> Path:
    return workdir / "serve"


class ServerName(BaseModel):
    name: RecordName


def record_path(workdir: Path, name: str) -> Path:
    """The record's file; `name` is checked to be one file name, so the path stays in the records folder."""
    return serve_dir(workdir) / f"{validate(ServerName, {'name': name}, 'a server name').name}{SUFFIX}"


def save(workdir: Path, record: ServerRecord) -> Path:
    make_dir(serve_dir(workdir))
    path = record_path(workdir, record.name)
    atomic_write_text(path, json.dumps(record.model_dump(), indent=2) + "\n")
    return path


def load(path: Path) -> ServerRecord:
    hint = "remove it if no server runs"
    record = load_model(path, "server-record", ServerRecord, follow=False, hint=hint)
    if f"{record.name}{SUFFIX}" != path.name:
        raise BadInput(
            f"server record {visible(path)} names the server {record.name!r}, not its own file's name", hint=hint
        )
    record._owners = (os.lstat(path).st_uid, os.lstat(path.parent).st_uid)
    return record


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
            what = f"port {port}" if other.port == port else f"card {shared[0]}" if shared else f"name {name}"
            raise LockHeld(
                f"serve {other.name} (pid {other.pid}) already runs on {what}",
                hint=f"'ascend-setup serve stop {other.name}' first, or pick another --port/--card",
            )
