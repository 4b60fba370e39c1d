"""`serve stop` and `serve status`: a detached server is found by its record, and ended only when its pid AND
that pid's start time still match (a reused pid belongs to someone else); never by name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Tuple

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.serve.run import stop_group
from ascend_setup.serve.server_records import ServerRecord, records, remove


def pick(workdir: Path, name: Optional[str]) -> ServerRecord:
    """The record named, or the only one there is."""
    found = records(workdir)
    if name is not None:
        match = [r for r in found if r.name == name]
        if not match:
            raise BadInput(f"no server named {name} was started from {workdir}",
                           hint=f"'ascend-setup serve status --workdir {workdir}' lists them")
        return match[0]
    if len(found) != 1:
        raise BadInput(f"{len(found)} servers are recorded in {workdir / 'serve'}; name one"
                       if found else f"no server was started from {workdir}")
    return found[0]


def stop_recorded(workdir: Path, name: Optional[str]) -> Tuple[ServerRecord, bool]:
    """Stop the recorded server's group; a record whose process is gone is only removed. (record, was running)"""
    record = pick(workdir, name)
    running = record.alive()
    if running:
        try:
            leader = os.getpgid(record.pid) == record.pid
        except ProcessLookupError:
            leader = False
        if not leader:
            raise AscendSetupError(f"pid {record.pid} no longer leads the group serve started; not touching it")
        stop_group(record.pid)
        if record.alive():
            raise AscendSetupError(f"serve {record.name} (pid {record.pid}) did not stop")
    remove(workdir, record.name)
    return record, running


def status(workdir: Path) -> List[dict]:
    return [{"name": r.name, "pid": r.pid, "port": r.port, "cards": r.cards, "running": r.alive(), "log": r.log,
             "detached": r.detached, "figures": r.figures} for r in records(workdir)]
