"""Resume after the instance restarts: the ~/.bashrc block resumes a stopped install at the next login
shell, in the background, and is gone once the install is done."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from helpers.stack import kill_group

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland

#: Ubuntu's default ~/.profile: a login shell reads ~/.bashrc through it.
PROFILE = 'if [ -n "$BASH_VERSION" ] && [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi\n'


def test_a_login_after_a_stop_resumes_and_the_block_goes(source_stack, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text(PROFILE)
    (home / ".bashrc").write_text("alias ll='ls -l'  # the user's own line stays\n")
    env = source_stack.env(HOME=str(home))
    workdir = tmp_path / "wd"
    proc = subprocess.Popen(
        source_stack.install_argv(workdir, "--resume-on-login"),
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (workdir / "logs" / "plugin-deps.log").exists() and proc.poll() is None:
        time.sleep(0.05)
    kill_group(proc)  # the instance stops
    rc = (home / ".bashrc").read_text()
    assert rc.startswith("alias ll=") and rc.count(f"ascend-setup resume-on-login ({workdir})") == 2

    login = subprocess.run(["bash", "-l", "-c", "true"], env=env, capture_output=True, text=True, timeout=60)
    assert "stopped at step" in login.stderr and "resuming it in the background" in login.stderr, login.stderr
    deadline = time.monotonic() + 300
    states = []
    while time.monotonic() < deadline:
        out = subprocess.run(
            source_stack.install_argv(workdir)[:3] + ["status", "--workdir", str(workdir), "--json"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        states = [s["state"] for s in json.loads(out)["steps"]]
        if all(s == "done" for s in states) and "resume-on-login" not in (home / ".bashrc").read_text():
            break
        time.sleep(0.5)
    assert all(s == "done" for s in states), (states, (workdir / "logs" / "resume-on-login.log").read_text()[-2000:])
    assert (home / ".bashrc").read_text() == "alias ll='ls -l'  # the user's own line stays\n"
    again = subprocess.run(["bash", "-l", "-c", "true"], env=env, capture_output=True, text=True, timeout=60)
    assert again.stderr == ""
