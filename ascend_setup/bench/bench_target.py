"""Which server a sweep measures: a NAME `serve --detach` recorded, or any OpenAI-compatible URL; and what the
server says of itself (/v1/models: its served names and max_model_len), read within a bounded wait."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.serve import server_records as records

#: How long a URL may stay silent before the sweep gives up on it (a server still loading answers /v1/models
#: only once ready; `serve` is the command that waits for that).
ANSWER_WAIT_S = 10.0


@dataclass
class Target:
    base: str
    model: str
    max_model_len: Optional[int]
    argv: str  # the server's command line, when serve recorded it ('' for a bare URL)


def from_record(workdir: Path, name: str) -> Tuple[str, str, List[str], Path]:
    """(base URL, served name, command words, log) of a recorded server that still runs; exit 2 when it does not."""
    path = records.record_path(workdir, name)
    if not path.is_file():
        raise BadInput(
            f"no server named {name!r} was started from {workdir}",
            hint="'ascend-setup serve status' lists them; or give --url",
        )
    record = records.load(path)
    if not record.alive():
        raise BadInput(
            f"server {name!r} (pid {record.pid}) is not running",
            hint=f"start it again with 'ascend-setup serve ... --detach', or see {record.log}",
        )
    argv = list(record.argv)
    served = argv[argv.index("--served-model-name") + 1] if "--served-model-name" in argv[:-1] else name
    return f"http://127.0.0.1:{record.port}", served, argv, Path(record.log)


def server_processes(workdir: Path, name: str) -> Tuple[List[int], List[int]]:
    """(the cards, the server's process and every one below it) of the recorded server `name`."""
    from ascend_setup.utils.interrupts import descendants

    record = records.load(records.record_path(workdir, name))
    try:
        below = descendants(record.pid)
    except OSError:
        below = []
    return list(record.cards), [record.pid, *below]


def models(base: str, wait_s: float = ANSWER_WAIT_S) -> Dict[str, Any]:
    """/v1/models, retried until `wait_s` passes; exit 1 with the last cause when the URL never answers."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/v1/models", timeout=min(5.0, wait_s)) as response:
                reply = json.loads(response.read(1 << 20))
            if isinstance(reply, dict) and isinstance(reply.get("data"), list):
                return reply
            cause = "its /v1/models is not an OpenAI model list"
        except urllib.error.HTTPError as exc:
            cause = f"HTTP {exc.code} from its /v1/models"
        except (OSError, ValueError) as exc:
            cause = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            raise AscendSetupError(
                f"{base} did not answer within {wait_s:g} s: {cause}",
                hint="is the server running and ready? ('ascend-setup serve status')",
            )
        time.sleep(0.5)


def resolve(base: str, model: Optional[str], argv: str = "", wait_s: float = ANSWER_WAIT_S) -> Target:
    """The served name (--model, else the server's only one) and its max_model_len."""
    entries = [e for e in models(base.rstrip("/"), wait_s)["data"] if isinstance(e, dict)]
    names = [str(e.get("id")) for e in entries]
    if model is None:
        if len(names) != 1:
            raise BadInput(
                f"the server serves {len(names)} models ({', '.join(names) or 'none'})", hint="name one with --model"
            )
        model = names[0]
    elif model not in names:
        raise BadInput(f"--model {model!r} is not served there (it serves {', '.join(names) or 'none'})")
    limit = next((e.get("max_model_len") for e in entries if e.get("id") == model), None)
    return Target(base.rstrip("/"), model, limit if isinstance(limit, int) and limit > 0 else None, argv)


def check_lengths(target: Target, input_len: int, output_len: int) -> None:
    """Exit 2 naming the limit when a request would not fit the server's context (vLLM would refuse each)."""
    if target.max_model_len and input_len + output_len > target.max_model_len:
        raise BadInput(
            f"--input-len {input_len} + --output-len {output_len} exceed the server's max_model_len "
            f"{target.max_model_len}",
            hint="shorter lengths, or a server started with a longer context",
        )


def log_size(log: Path) -> int:
    """Where a failure during the sweep starts in the server's log: its size now (0 when it cannot be read)."""
    try:
        return log.stat().st_size
    except OSError:
        return 0


def triaged(failure: AscendSetupError, name: str, log: Path, offset: int) -> AscendSetupError:
    """A level failed against the recorded server `name`: the root cause of what its log says from `offset` (the
    sweep's start) and its fix, or `failure` as it is when the log names none (or cannot be read)."""
    from ascend_setup.knowledge.scan import triage_stream
    from ascend_setup.utils.inputs import open_input

    try:
        with open_input(log, "log", follow=False) as handle:
            handle.seek(offset)
            diagnosis = triage_stream(handle)
    except BadInput:
        diagnosis = None
    if diagnosis is None or diagnosis.id is None:
        return AscendSetupError(
            failure.message, hint=f"read the server's log: {log}", details=diagnosis.render() if diagnosis else None
        )
    return AscendSetupError(
        f"{failure.message}; server {name}'s log: {diagnosis.cause}",
        hint=f"{diagnosis.fix + '; ' if diagnosis.fix else ''}full log: {log}",
        details=diagnosis.render(),
    )
