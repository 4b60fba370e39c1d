"""`serve stop` and `serve status`: a detached server is found by its record, and ended only when the process
proves to be the one serve started (utils/procs.Started: pid above 1, this user's, the recorded start time, the
run token in its environment, the group it leads); never by name, never a record another user owns."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.serve.run import GRACE_SECONDS
from ascend_setup.serve.server_records import ServerRecord, record_path, records, remove


def pick(workdir: Path, name: Optional[str]) -> ServerRecord:
    """The record named, or the only one there is."""
    found = records(workdir)
    if name is not None:
        match = [r for r in found if r.name == name]
        if not match:
            raise BadInput(
                f"no server named {name!r} was started from {workdir}",
                hint=f"'ascend-setup serve status --workdir {workdir}' lists them",
            )
        return match[0]
    if len(found) != 1:
        raise BadInput(
            f"{len(found)} servers are recorded in {workdir / 'serve'}; name one"
            if found
            else f"no server was started from {workdir}"
        )
    return found[0]


def stop_recorded(workdir: Path, name: Optional[str]) -> Tuple[ServerRecord, bool]:
    """Stop the recorded server's group; a record whose process is gone is only removed. (record, was running)
    A process that runs but is not proven the one serve started is bad input: nothing signalled, record kept."""
    record = pick(workdir, name)
    owner = record.foreign_owner()
    if owner is not None:
        raise BadInput(
            f"server record {record_path(workdir, record.name)} (or its folder) belongs to uid {owner}: "
            f"ascend-setup reads it but does not act on it as uid {os.geteuid()}",
            hint="run 'serve stop' as that user",
        )
    started = record.started
    running = started.running()
    why = started.stop(GRACE_SECONDS)
    if why is not None:
        raise BadInput(
            f"serve {record.name}: not stopping pid {record.pid}: {why}",
            hint=f"if no server of ours runs, remove {record_path(workdir, record.name)}",
        )
    if started.running() and started.refusal() is None:
        raise AscendSetupError(f"serve {record.name} (pid {record.pid}) did not stop")
    remove(workdir, record.name)
    return record, running


def status(workdir: Path) -> List[Dict[str, Any]]:
    return [
        {
            "name": r.name,
            "pid": r.pid,
            "port": r.port,
            "cards": r.cards,
            "running": r.alive(),
            "log": r.log,
            "detached": r.detached,
            "figures": r.figures,
        }
        for r in records(workdir)
    ]
