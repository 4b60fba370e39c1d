"""Subprocesses of the pipeline: argument lists only, output into the step log, failures explained by the
caller's `explain` (knowledge's triage: this leaf imports nothing of the domain); and the one rule for
stopping a process: only one this tool started, proven (`Started`), through `send`, which never signals pid 1."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

from ascend_setup.errors import StepFailed
from ascend_setup.utils.diskfull import disk_full, in_output, path_in
from ascend_setup.utils.files import open_append
from ascend_setup.utils.procstat import start_ticks

LineHook = Callable[[str], None]
#: An argument of a command: a string, or a path (each passed as str()).
Arg = Union[str, "os.PathLike[str]"]
#: Who is shown each output line as it arrives (the terminal's live progress), besides the step log.
_activity: ContextVar[Optional[LineHook]] = ContextVar("activity", default=None)


class Explanation(Protocol):
    """A failure's root cause in a command's output (knowledge's Diagnosis)."""

    cause: str
    fix: Optional[str]

    def render(self) -> str: ...


#: Finds the root cause in a failed command's output lines (knowledge.scan.triage), or None.
Explain = Callable[[List[str]], Optional[Explanation]]


def set_activity(hook: Optional[LineHook]) -> None:
    _activity.set(hook)


def run_logged(
    argv: Sequence[Arg],
    log: Path,
    *,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[Path] = None,
    on_line: Optional[LineHook] = None,
    what: Optional[str] = None,
    writes: Optional[Path] = None,
    explain: Optional[Explain] = None,
) -> None:
    """Run `argv`, appending every output line to `log`; a non-zero exit raises StepFailed naming the
    root cause `explain` finds in this attempt's output (not its last line), or DiskFull when the output reports
    ENOSPC (naming the path it gives, else `writes`: where the command writes, else its cwd)."""
    what = what or Path(argv[0]).name
    merged: Dict[str, str] = dict(os.environ if env is None else env)
    merged.setdefault("PYTHONUNBUFFERED", "1")
    lines: List[str] = []
    with open_append(log) as handle:
        handle.write("$ " + " ".join(map(str, argv)) + "\n")
        handle.flush()
        try:
            proc = subprocess.Popen(
                [str(a) for a in argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=merged,
                cwd=cwd,
                text=True,
                errors="replace",
                bufsize=1,
            )
        except OSError as exc:
            raise StepFailed(f"{what} could not start: {exc}") from None
        assert proc.stdout is not None
        log_full: Optional[OSError] = None
        for line in proc.stdout:
            if log_full is None:
                try:
                    handle.write(line)
                    handle.flush()  # a SIGKILL of ours must not take the child's last words with it
                except OSError as exc:  # the disk is full: keep reading (the child must not block), report after
                    log_full = exc
            lines.append(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))
            shown = _activity.get()
            if shown is not None:
                shown(line.rstrip("\n"))
        code = proc.wait()
        if log_full is None:
            handle.write(f"[exit {code}]\n")
    if log_full is not None and code == 0:
        raise log_full
    if code != 0:
        full = in_output(lines)
        if full is not None:
            raise disk_full(path_in(full) or writes or cwd or log.parent, what)
        if log_full is not None:
            raise log_full
        diagnosis = explain(lines) if explain is not None else None
        if diagnosis is not None:
            raise StepFailed(
                f"{what} failed: {diagnosis.cause}",
                hint=f"{diagnosis.fix + '; ' if diagnosis.fix else ''}full log: {log}",
                details=diagnosis.render(),
            )
        raise StepFailed(f"{what} exited with status {code}", hint=f"see {log}")


def capture(
    argv: Sequence[Arg], *, env: Optional[Mapping[str, str]] = None, timeout: float = 300, cwd: Optional[Path] = None
) -> subprocess.CompletedProcess[str]:
    """Run a short check and keep its output (no log). A program that cannot start is exit 127."""
    args = [str(a) for a in argv]
    try:
        return subprocess.run(
            args,
            capture_output=True,
            text=True,
            env=dict(env) if env else None,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
    except OSError as exc:
        return subprocess.CompletedProcess(args, 127, "", str(exc))


def pid_alive(pid: int, unknown: bool = True) -> bool:
    """Whether `pid` runs. A zombie (killed, never reaped: common in containers whose PID 1 does not reap
    orphans) holds its pid but will never do anything again, so it counts as gone. `unknown` is the answer
    when /proc cannot tell (True keeps a compile lock; False lets an interrupt stop waiting)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return unknown
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


# -- Stopping a process: only one this tool started, proven ---------------------------------------------------

#: The variable the tool puts, with a fresh random value, into the environment of every process it starts to
#: stop later (a server, a node's command): read back from /proc/PID/environ, it proves the process is ours.
RUN_TOKEN_VAR = "ASCEND_SETUP_RUN_TOKEN"
#: /proc/PID/environ holds the environment a process started with; the kernel bounds it by ARG_MAX's share.
MAX_ENVIRON = 4 * 1024 * 1024
PR_SET_CHILD_SUBREAPER = 36


def new_run_token() -> str:
    import secrets

    return secrets.token_hex(16)


def _uid_of(pid: int) -> Optional[int]:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def carries_token(pid: int, token: str) -> bool:
    """Whether `pid` started with RUN_TOKEN_VAR=`token` in its environment (inherited by what it starts)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read(MAX_ENVIRON)
    except OSError:
        return False
    return f"{RUN_TOKEN_VAR}={token}".encode() in data.split(b"\0")


def carriers(token: str) -> List[int]:
    """Every process of this uid whose environment carries `token`: the server or node command and all it
    started, also a grandchild that left its group and session (setsid keeps the environment)."""
    me, own = os.getpid(), os.geteuid()
    found = []
    for entry in os.listdir("/proc"):
        if (
            entry.isdigit()
            and int(entry) > 1
            and int(entry) != me
            and _uid_of(int(entry)) == own
            and carries_token(int(entry), token)
        ):
            found.append(int(entry))
    return found


def send(pid: int, sig: int, *, group: bool = False) -> bool:
    """The one place a signal leaves the tool: never to pid or group 1 or below (kill(-1) and killpg(1) reach
    every process the caller may signal). False when the process (group) is gone or not ours to signal."""
    if pid <= 1:
        raise ValueError(f"refusing to signal {'process group' if group else 'pid'} {pid}")
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def make_subreaper() -> bool:
    """Make this process the child subreaper of what it starts (Linux): a grandchild whose parent exits, or
    that leaves its session, is re-parented to us instead of init, so it stays below us and is found and
    ended. False where the kernel (or the platform) has no such call."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _reap(pids: Sequence[int], skip: Optional[int]) -> None:
    """Collect the exit of each adopted orphan in `pids` that has ended (a subreaper must, or it keeps zombies);
    never `skip` (the caller's own Popen, which collects its child) and never any other pid."""
    for pid in pids:
        if pid != skip:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child: its own parent collects it
                pass


@dataclass(frozen=True)
class Started:
    """A process this tool started, as it was recorded: its pid, the pid's start time (a pid alone may be
    reused), and the run token put into its environment. It was started as the leader of a process group of
    its own (pgid == pid). A signal goes to it only when all of that still holds, as `refusal` checks."""

    pid: int
    start_ticks: int
    token: Optional[str]

    @classmethod
    def child(cls, proc: subprocess.Popen[Any], token: str) -> Started:
        return cls(proc.pid, start_ticks(proc.pid) or 0, token)

    def running(self) -> bool:
        return self.pid > 1 and pid_alive(self.pid, unknown=False)

    def refusal(self, child: Optional[subprocess.Popen[Any]] = None) -> Optional[str]:
        """Why this process is not proven to be the one the tool started (None: it is). Checked in this order:
        pid above 1, this user's, the recorded start time, the run token, the group it was started as. `child`:
        our own Popen of it, not yet collected, whose pid no other process can have until we collect it: that
        parenthood stands for the user and the token (a run prefix may change user, or clear the environment)."""
        if self.pid <= 1:
            return f"pid {self.pid} is never signalled"
        ours = child is not None and child.pid == self.pid and child.returncode is None
        uid = _uid_of(self.pid)
        if uid is None:
            return f"pid {self.pid} is gone"
        if uid != os.geteuid() and not ours:
            return f"pid {self.pid} belongs to uid {uid}, not to uid {os.geteuid()} that runs ascend-setup"
        if start_ticks(self.pid) != self.start_ticks:
            return f"pid {self.pid} started at another time than recorded: it is another process"
        if not self.token and not ours:
            return f"pid {self.pid}'s record holds no run token (an older ascend-setup wrote it)"
        if not ours and not carries_token(self.pid, self.token or ""):
            return f"pid {self.pid} does not carry the run token ascend-setup gave the process it started"
        try:
            leader = os.getpgid(self.pid) == self.pid
        except ProcessLookupError:
            return f"pid {self.pid} is gone"
        if not leader:
            return f"pid {self.pid} no longer leads the process group it was started in"
        return None

    def _proven(self, child: Optional[subprocess.Popen[Any]]) -> bool:
        return self.running() and self.refusal(child) is None

    def _signal(self, sig: int, with_carriers: bool, child: Optional[subprocess.Popen[Any]]) -> List[int]:
        """`sig` to the group while its leader proves ours, and to each process carrying the token (a member
        whose leader has gone, a grandchild in a session of its own). The carriers signalled, to reap."""
        group = self._proven(child)
        if group:
            send(self.pid, sig, group=True)
        # a carrier still in that group has had this signal: a second SIGTERM would reach a shutdown midway
        return (
            _signal_carriers(self.token, sig, skip_group=self.pid if group else None)
            if with_carriers and self.token
            else []
        )

    def _left(self, with_carriers: bool, child: Optional[subprocess.Popen[Any]]) -> bool:
        return self._proven(child) or bool(with_carriers and self.token and carriers(self.token))

    def stop(
        self, grace: float, child: Optional[subprocess.Popen[Any]] = None, *, carriers: bool = True
    ) -> Optional[str]:
        """SIGTERM, then SIGKILL to what is left after `grace`, until nothing of it is left (at most 5 s more):
        the group, and with `carriers` every process carrying the token. Refuses (returns why, signals nothing)
        when the process runs but is not proven ours. `child`: our own Popen of it, reaped as we wait."""
        if self.pid <= 1:
            return self.refusal()
        if child is not None:
            child.poll()
        if self.running():
            why = self.refusal(child)
            if why is not None:
                return why
        _until_gone(lambda sig: self._signal(sig, carriers, child), lambda: self._left(carriers, child), grace, child)
        return None


def _signal_carriers(token: str, sig: int, skip_group: Optional[int] = None) -> List[int]:
    """`sig` to each process carrying `token`, but those in process group `skip_group` (signalled as a group);
    every carrier found is returned, to reap."""
    found = carriers(token)
    for pid in found:
        try:
            in_group = skip_group is not None and os.getpgid(pid) == skip_group
        except ProcessLookupError:
            continue
        if not in_group:
            send(pid, sig)
    return found


def stop_carriers(token: str, grace: float) -> None:
    """End every process of ours that carries `token`, wherever it is now (SIGTERM, SIGKILL after `grace`)."""
    _until_gone(lambda sig: _signal_carriers(token, sig), lambda: bool(carriers(token)), grace, None)


def _until_gone(
    signal_all: Callable[[int], List[int]],
    left: Callable[[], bool],
    grace: float,
    child: Optional[subprocess.Popen[Any]],
) -> None:
    """SIGTERM through `signal_all`, SIGKILL after `grace`; wait (5 s at most) until `left()` says none is left,
    collecting the exits of the adopted orphans signalled (never `child`'s: its Popen collects it)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        found = signal_all(sig)
        end = time.monotonic() + wait
        while True:
            if child is not None:
                child.poll()
            _reap(found, child.pid if child is not None else None)
            if not left():
                return
            if time.monotonic() >= end:
                break
            time.sleep(0.05)


def read_capped(
    proc: subprocess.Popen[bytes], timeout: float, cap: int, err_cap: int
) -> Tuple[bytes, bytes, Optional[str]]:
    """A child's stdout up to `cap` bytes and the last `err_cap` of its stderr, within `timeout` seconds (its
    exit included): (stdout, stderr, None), or why reading stopped early ("timeout", or "cut" once stdout
    passed `cap`): a flood of output is cut, never gathered into memory whole. Once the child has exited,
    only what is already in the pipes is read: a grandchild that keeps them open does not hold the reader."""
    import selectors

    out, err = bytearray(), bytearray()
    end = time.monotonic() + timeout
    with selectors.PollSelector() as selector:  # no descriptor of its own, unlike epoll: 256 at once stay cheap
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                selector.register(stream.fileno(), selectors.EVENT_READ, stream is proc.stdout)
        exited = False
        while selector.get_map():
            left = end - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "timeout"
            ready = selector.select(0 if exited else min(left, 0.2))
            if not ready:
                if exited:
                    break
                exited = proc.poll() is not None
                continue
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                elif key.data:
                    out += chunk
                    if len(out) > cap:
                        return bytes(out[:cap]), bytes(err), "cut"
                else:
                    err += chunk
                    del err[:-err_cap]
    try:
        proc.wait(max(0.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(out), bytes(err), "timeout"
    return bytes(out), bytes(err), None
