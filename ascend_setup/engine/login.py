"""Resume after the instance restarts: a guarded block in ~/.bashrc (which survives on /home) that, at
the next login, says the install was interrupted and resumes it in the background.

Preemptible instances stop every 36-85 minutes; a person had to notice and type the command again.
The block is ours alone: found by its exact markers (one per workdir), written atomically, and removed
by the run that completes the install (or by --no-resume-on-login). Nothing else in the file is touched.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from ascend_setup.errors import BadInput
from ascend_setup.utils.files import atomic_write_text, open_append
from ascend_setup.utils.inputs import read_input_text

GUARD = "ASCEND_SETUP_LOGIN_CHECKED"
HINT = "resume-on-login keeps its block in ~/.bashrc: make it a regular UTF-8 text file, or run without it"
LOG_NAME = "resume-on-login.log"


def bashrc(home: Optional[str] = None) -> Path:
    return Path(home or os.path.expanduser("~")) / ".bashrc"


def _what(given: Path, path: Path) -> str:
    """~/.bashrc as a message names it: the file the user knows, and what its link leads to."""
    return f"shell startup file {given}" + (f" (a link to {path})" if path != given else "")


def _markers(workdir: Path) -> Tuple[str, str]:
    return (
        f"# >>> ascend-setup resume-on-login ({workdir}) >>>",
        f"# <<< ascend-setup resume-on-login ({workdir}) <<<",
    )


def block(workdir: Path, python: str = sys.executable, argv: Optional[List[str]] = None) -> str:
    """`argv`: the tool's arguments to run at login (default: resume the install in `workdir`)."""
    start, end = _markers(workdir)
    argv = argv or ["resume", "--workdir", str(workdir), "--on-login"]
    command = " ".join(shlex.quote(a) for a in [python, "-m", "ascend_setup", *argv])
    return (
        "\n".join(
            [
                start,
                "# Added by 'ascend-setup ... --resume-on-login' (install or model fetch); "
                "removed when that run completes.",
                f'if [ -z "${{{GUARD}:-}}" ] && [ -x {shlex.quote(python)} ]; then',
                f"  export {GUARD}=1",
                f"  {command}",
                "fi",
                end,
            ]
        )
        + "\n"
    )


def _without(text: str, workdir: Path) -> str:
    start, end = _markers(workdir)
    lines, out, inside = text.splitlines(keepends=True), [], False
    for line in lines:
        if line.rstrip("\n") == start:
            inside = True
        elif inside and line.rstrip("\n") == end:
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)


def install_block(workdir: Path, home: Optional[str] = None, argv: Optional[List[str]] = None) -> Path:
    """Add (or refresh) the block for `workdir`; idempotent."""
    path = bashrc(home).resolve()  # a dotfiles link is the user's own: edit what it points to, keep the link
    text = read_input_text(path, "shell-rc", hint=HINT, what=_what(bashrc(home), path)) if path.exists() else ""
    kept = _without(text, workdir)
    atomic_write_text(path, kept + ("" if not kept or kept.endswith("\n") else "\n") + block(workdir, argv=argv))
    return path


def remove_block(workdir: Path, home: Optional[str] = None) -> bool:
    """Remove the block for `workdir`, if there is one; True when something was removed."""
    path = bashrc(home).resolve()
    if not path.exists():
        return False
    try:
        text = read_input_text(path, "shell-rc")
    except BadInput:  # a FIFO, a device, a huge or binary file: none holds the block we write (as text)
        return False
    kept = _without(text, workdir)
    if kept == text:
        return False
    atomic_write_text(path, kept)
    return True


def resume_in_background(workdir: Path) -> Path:
    """`ascend-setup resume` detached from the login shell (nohup, its own session), logging to the workdir."""
    log = workdir / "logs" / LOG_NAME
    log.parent.mkdir(parents=True, exist_ok=True)
    with open_append(log) as handle:
        subprocess.Popen(
            ["nohup", sys.executable, "-m", "ascend_setup", "resume", "--workdir", str(workdir)],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, GUARD: "1"},
        )
    return log
