"""The sweep of abandoned temp roots meets other runs' roots in every state: one being made (no owner file, or
an empty one from a writer of another version), one alive, one whose run is gone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_setup.utils import tempdirs


def test_a_root_in_any_state_is_swept_or_kept_without_a_crash(tmp_path: Path) -> None:
    states = {"no-owner": None, "empty-owner": "", "partial-owner": "   \n", "alive": None, "gone": "999999999 1\n"}
    for name, owner in states.items():
        root = tmp_path / f"{tempdirs.PREFIX}{name}"
        root.mkdir()
        if name == "alive":
            owner = f"{tempdirs._process_identity(os.getpid())}\n"
        if owner is not None:
            (root / tempdirs.OWNER).write_text(owner)
    tempdirs._sweep_abandoned(str(tmp_path))
    left = sorted(p.name[len(tempdirs.PREFIX) :] for p in tmp_path.iterdir())
    assert left == ["alive", "empty-owner", "no-owner", "partial-owner"]  # only the gone run's root is removed


def test_a_root_of_another_pid_namespace_is_never_swept(tmp_path: Path) -> None:
    """A run in a container or `unshare --pid` sharing this temp dir names pids of its own namespace: gone
    from here is no evidence (the sweep inside such a namespace removed live runs' roots on the host)."""
    here = tempdirs._pid_namespace()
    for name, owner in {
        "gone-here": f"999999999 1 {here}\n",
        "gone-elsewhere": "999999999 1 pid:[1]\n",
        "alive-here": f"{tempdirs._process_identity(os.getpid())} {here}\n",
    }.items():
        root = tmp_path / f"{tempdirs.PREFIX}{name}"
        root.mkdir()
        (root / tempdirs.OWNER).write_text(owner)
    tempdirs._sweep_abandoned(str(tmp_path))
    assert sorted(p.name[len(tempdirs.PREFIX) :] for p in tmp_path.iterdir()) == ["alive-here", "gone-elsewhere"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare --pid")
def test_a_run_in_a_pid_namespace_keeps_the_roots_of_runs_outside_it(tmp_path: Path) -> None:
    """The real thing: the tool's sweep, run inside `unshare --pid --mount-proc`, meets the root of a live run
    of this namespace (this test's process) and keeps it."""
    root = tmp_path / f"{tempdirs.PREFIX}host-run"
    root.mkdir()
    (root / tempdirs.OWNER).write_text(f"{tempdirs._process_identity(os.getpid())} {tempdirs._pid_namespace()}\n")
    sweep = f"from ascend_setup.utils import tempdirs; tempdirs._sweep_abandoned({str(tmp_path)!r})"
    subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", sweep], check=True)
    assert root.is_dir()
