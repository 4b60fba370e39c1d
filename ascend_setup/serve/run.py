"""Start the venv's `vllm serve` with CANN's environment in its own process group, its log written line by line
to `<workdir>/serve/<name>.log` by the server itself (so it outlives this tool), and wait until it answers.

Start-up takes minutes (weights, torch.compile, graph capture), so the wait has a deadline scaled by the
weights' size, names the phase it reads in the log, and bounds every network call. If the server exits or the
deadline passes, its whole group is stopped and its log triaged: the last line (`Engine core initialization
failed`) is only a symptom. In the foreground the server dies with this tool (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ascend_setup.errors import AscendSetupError
from ascend_setup.utils.files import open_append
from ascend_setup.utils.procs import RUN_TOKEN_VAR, Started, make_subreaper, new_run_token

PR_SET_PDEATHSIG = 1
#: Bytes a second the weights are assumed to load at (network disks are slow), then compile and graph capture.
LOAD_BYTES_PER_SECOND = 0.5e9
COMPILE_SECONDS, CAPTURE_SECONDS, MARGIN_SECONDS, MAX_SECONDS = 120.0, 120.0, 60.0, 2700.0
POLL_SECONDS = 1.0
CONNECT_TIMEOUT = 5.0
GRACE_SECONDS = 10.0

#: What vLLM (and vllm-ascend) log as start-up goes on, in order: the phase a person waits in.
PHASES = (
    (
        re.compile(r"Starting to load model|Loading weights|Loading safetensors|Loading model weights"),
        "loading weights",
    ),
    (re.compile(r"Dynamo bytecode transform|torch\.compile|Compiling a graph"), "compiling"),
    (re.compile(r"[Cc]apturing (?:CUDA |ACL |NPU )?graphs?|Graph capturing"), "capturing graphs"),
    (re.compile(r"KV cache|init engine"), "allocating the KV cache"),
    (re.compile(r"Starting vLLM API server|Application startup complete"), "starting the API server"),
)


def phase_of(line: str) -> Optional[str]:
    return next((phase for pattern, phase in PHASES if pattern.search(line)), None)


def deadline_seconds(weights_bytes: int, graph_mode: bool) -> float:
    """Weights at a slow disk's pace, plus compile, plus graph capture, plus a margin; capped."""
    seconds = weights_bytes / LOAD_BYTES_PER_SECOND + COMPILE_SECONDS + MARGIN_SECONDS
    return min(MAX_SECONDS, seconds + (CAPTURE_SECONDS if graph_mode else 0.0))


def _die_with_parent() -> None:
    """preexec: a group of its own (Ctrl-C reaches the tool, which stops it) and SIGTERM when the tool dies,
    even by SIGKILL; vLLM's main process then stops its engine and workers."""
    os.setpgid(0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start(argv: List[str], env: Dict[str, str], log: Path, *, detach: bool) -> Tuple[subprocess.Popen[bytes], Started]:
    """The server, writing its own log; detached it gets a session of its own and outlives the tool. A fresh
    run token in its environment (which its engine and workers inherit) is what proves it ours when stopped;
    in the foreground the tool becomes the subreaper of what the server starts, so nothing of it escapes."""
    token = new_run_token()
    if not detach:
        make_subreaper()
    with open_append(log) as handle:
        handle.write("$ " + " ".join(argv) + "\n")
        handle.flush()
        try:
            proc = subprocess.Popen(
                argv,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**env, "PYTHONUNBUFFERED": "1", RUN_TOKEN_VAR: token},
                cwd=log.parent,
                start_new_session=detach,
                preexec_fn=None if detach else _die_with_parent,
            )
        except OSError as exc:
            raise AscendSetupError(
                f"vllm serve could not start: {exc}",
                hint="is vllm installed in the venv? 'ascend-setup audit --venv' says",
            ) from None
    return proc, Started.child(proc, token)


def stop_server(server: Started, proc: Optional[subprocess.Popen[bytes]] = None) -> None:
    """SIGTERM to the server's group (vLLM shuts its engine down), SIGKILL to what is left after the grace; every
    process that carries its token too. `proc`: our own child, reaped as we wait."""
    server.stop(GRACE_SECONDS, child=proc)


class LogTail:
    """The lines the server has written since the last call (the log is its own; we only read)."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path, self.offset, self.partial = path, offset, b""

    def new_lines(self) -> List[str]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read(4 << 20)
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *lines, self.partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]


def http_get(url: str, timeout: float = CONNECT_TIMEOUT) -> Optional[bytes]:
    """The body of a 200, or None (refused, reset, timed out, any other status): a server still starting."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read(1 << 20) if response.status == 200 else None
    except (OSError, urllib.error.URLError, ValueError):
        return None


def served(base: str, name: str) -> bool:
    body = http_get(f"{base}/v1/models")
    try:
        return body is not None and any(m.get("id") == name for m in json.loads(body).get("data", []))
    except (ValueError, AttributeError):
        return False


def _last_line(log: Path, offset: int) -> str:
    """The attempt's last non-empty line: where a server that hangs without an error stopped."""
    with log.open("rb") as handle:
        handle.seek(max(offset, handle.seek(0, os.SEEK_END) - 65536))
        lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(none)"


def triaged_failure(what: str, log: Path, name: str, offset: int = 0) -> AscendSetupError:
    """`what` happened; the root cause (knowledge's reader) of this attempt's part of the log, from `offset` (the
    log keeps every earlier start of the same server), and its fix, or the log to read."""
    from ascend_setup.knowledge.scan import triage_stream

    with log.open("rb") as handle:
        handle.seek(offset)
        diagnosis = triage_stream(handle)
    if diagnosis is None or diagnosis.id is None:
        line = (
            f"; the most error-like line: {diagnosis.line.strip()}"
            if diagnosis and diagnosis.line
            else f"; its last line: {_last_line(log, offset)}"
        )
        return AscendSetupError(
            f"serve {name}: {what}{line}",
            hint=f"read the log: {log}",
            details=diagnosis.render() if diagnosis else None,
        )
    return AscendSetupError(
        f"serve {name}: {what}: {diagnosis.cause}",
        hint=f"{diagnosis.fix + '; ' if diagnosis.fix else ''}full log: {log}",
        details=diagnosis.render(),
    )


def wait_ready(
    proc: subprocess.Popen[bytes],
    server: Started,
    *,
    base: str,
    name: str,
    log: Path,
    offset: int,
    deadline: float,
    on_line: Callable[[str], None] = lambda line: None,
) -> float:
    """Seconds until `/health` answers 200 and `/v1/models` lists `name`, reading this attempt's log from
    `offset`. On exit or deadline: the group stopped, then AscendSetupError with the triaged cause."""
    started = time.monotonic()
    tail = LogTail(log, offset)
    phase = "starting"
    while True:
        for line in tail.new_lines():
            phase = phase_of(line) or phase
            on_line(line)
        code = proc.poll()
        if code is not None:
            stop_server(server, proc)
            raise triaged_failure(f"vllm serve exited with status {code} while {phase}", log, name, offset)
        if http_get(f"{base}/health") is not None and served(base, name):
            return time.monotonic() - started
        if time.monotonic() - started > deadline:
            failure = triaged_failure(f"not ready after {deadline:.0f} s (last phase: {phase})", log, name, offset)
            stop_server(server, proc)  # after reading the log: what it says while stopping is not the cause
            raise failure
        time.sleep(POLL_SECONDS)
