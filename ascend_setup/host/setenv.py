"""Capture what CANN's set_env.sh scripts export, without letting them near our own shell.

The scripts expand $LD_LIBRARY_PATH unguarded (fatal under `set -u`), return non-zero inside
(fatal under `set -e`), sometimes turn those options on themselves, print chatter, and may even
`exit`. So they run in a child bash: options off, each `source` inside an `||` list (which makes
bash ignore errexit for everything it runs), stdout/stderr captured for diagnosis, and the final
environment written by an EXIT trap so even an `exit` inside a script cannot lose it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from ascend_setup.errors import AscendSetupError

#: Variables bash itself changes; not the script's doing.
_NOISE = {"_", "SHLVL", "PWD", "OLDPWD", "BASH_EXECUTION_STRING", "BASHOPTS", "SHELLOPTS", "PS1", "PS2", "PS4"}

_CAPTURE = r"""
out="$1"; shift
trap 'echo "exit:$?" >> "$out.status"; env -0 > "$out"' EXIT
set +eu
for script in "$@"; do
  status=0
  source "$script" </dev/null || status=$?
  set +eu
  echo "$status" >> "$out.status"
done
"""


@dataclass
class CapturedEnv:
    """The variables the scripts set or changed, ready to lay over os.environ for a subprocess."""

    changes: Dict[str, str]
    scripts: List[str]
    statuses: List[int]
    output: str
    exited: Optional[str] = None

    def problems(self) -> List[str]:
        """What the scripts did that would have killed a strict caller (for the log and doctor)."""
        notes = [f"{script} returns {status}" for script, status in zip(self.scripts, self.statuses) if status]
        if self.exited:
            notes.append(f"{self.exited} calls exit: the scripts after it never ran")
        return notes

    def apply(self, base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        env = dict(os.environ if base is None else base)
        env.update(self.changes)
        return env


def _parse_env0(data: bytes) -> Dict[str, str]:
    result: Dict[str, str] = {}
    for chunk in data.split(b"\0"):
        if b"=" in chunk:
            key, _, value = chunk.partition(b"=")
            result[key.decode(errors="replace")] = value.decode(errors="replace")
    return result


def capture_env(
    scripts: Sequence[Path], *, timeout: float = 60.0, base: Optional[Mapping[str, str]] = None
) -> CapturedEnv:
    """Source `scripts` in order in a child bash and return what they changed."""
    for script in scripts:
        if not Path(script).is_file():
            raise AscendSetupError(
                f"CANN environment script {script} does not exist",
                hint="check --cann-home, or reinstall the CANN toolkit",
            )
        if not os.access(script, os.R_OK):
            raise AscendSetupError(
                f"CANN environment script {script} is not readable",
                hint=f"fix its permissions (chmod a+r {script}) or run as its owner",
            )
    env = dict(os.environ if base is None else base)
    with tempfile.TemporaryDirectory(prefix="ascend-setup-env-") as tmp:
        out = Path(tmp) / "env0"
        argv = ["bash", "--noprofile", "--norc", "-c", _CAPTURE, "capture", str(out), *map(str, scripts)]
        try:
            proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AscendSetupError(
                f"sourcing {', '.join(map(str, scripts))} did not finish within {timeout:.0f} s",
                hint="the script waits for something (input, a lock, a network share); run it by hand to see",
            ) from None
        except FileNotFoundError:
            raise AscendSetupError("bash is not installed; it is needed to read CANN's set_env.sh") from None
        try:
            after = _parse_env0(out.read_bytes())
            status_lines = Path(f"{out}.status").read_text().split()
        except FileNotFoundError:
            after, status_lines = {}, []
    if not after:
        raise AscendSetupError(
            f"sourcing {', '.join(map(str, scripts))} left no environment to read",
            hint="run the script by hand in bash to see what it does",
        )
    changes = {k: v for k, v in after.items() if k not in _NOISE and env.get(k) != v}
    text = (proc.stdout + proc.stderr).decode(errors="replace")
    statuses = [int(x) for x in status_lines if x.lstrip("-").isdigit()]
    exited = None
    if len(statuses) < len(scripts):
        exited = str(scripts[len(statuses)])
        final = next((x for x in status_lines if x.startswith("exit:")), "exit:1")
        statuses.append(int(final.split(":")[1]))
    return CapturedEnv(
        changes=changes, scripts=[str(s) for s in scripts], statuses=statuses, output=text, exited=exited
    )
