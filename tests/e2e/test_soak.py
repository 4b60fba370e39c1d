"""The soak: SIGKILL the whole install's process group at seeded random moments, 50+ times over the
whole pipeline (half --installer pip, half uv), and check every promise after each kill.

Run with `pytest -m soak` (.ci/run does; the default run skips it). ASCEND_SETUP_SOAK_SEED picks
another seed; a failure prints the seed, so it replays.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List

import pytest
from helpers.processes import attempts as _headers
from helpers.processes import wait_for as _wait_for
from helpers.stack import installed, kill_group, lock_versions

from ascend_setup.engine.state import StateStore
from ascend_setup.engine.workdir import Workdir
from ascend_setup.steps.install_session import install_store

KILLS_PER_INSTALLER = 25
#: A kill's moment: with STARTUP_SHARE, during the start-up (seconds after the spawn, before any step
#: runs); else seconds after the attempt's first step began (after start-up, which only checks the done
#: steps, so each attempt gets further however loaded the machine is). A workdir whose install finishes
#: between kills is replaced by a fresh one, so the early steps are hit again.
STARTUP_SHARE, STARTUP, AFTER_FIRST_STEP = 0.15, (0.2, 2.0), (0.1, 4.5)


def _group_alive(pgid: int) -> List[int]:
    """Pids of live (not zombie) processes in the process group `pgid`."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


def _hit(store: StateStore, before: Dict[str, int], after: Dict[str, int]) -> str:
    """The step this attempt was running when killed: one it started (its log got a header) and left
    `started`; 'startup' when it was killed before it started any (checking the done ones)."""
    steps = store.load().steps  # parses, whatever the moment of the kill
    began = [n for n in after if after[n] != before.get(n, 0)]
    return next(
        (n for n in began if n in steps and steps[n].state == "started"), "startup" if not began else "between steps"
    )


@pytest.mark.soak
def test_soak_sigkill_the_pipeline_50_times(source_stack, tmp_path: Path) -> None:
    seed = int(os.environ.get("ASCEND_SETUP_SOAK_SEED", "2626"))
    rng = random.Random(seed)
    began = time.monotonic()
    hits: Dict[str, Counter] = {}
    finished: List[Path] = []
    for installer in ("pip", "uv"):
        hits[installer] = Counter()
        kills, round_ = 0, 0
        workdir = tmp_path / f"{installer}-{round_}"
        while kills < KILLS_PER_INSTALLER:
            before = _headers(workdir)
            proc = source_stack.spawn(workdir, "--installer", installer)
            if rng.random() < STARTUP_SHARE:
                _wait_for(lambda: False, proc, timeout=rng.uniform(*STARTUP))
            else:
                delay = rng.uniform(*AFTER_FIRST_STEP)
                if _wait_for(lambda: _headers(workdir) != before, proc, timeout=300, poll=0.05):  # noqa: B023
                    _wait_for(lambda: False, proc, timeout=delay)
            if proc.poll() is None:
                kill_group(proc)
                kills += 1
                deadline = time.monotonic() + 10
                while _group_alive(proc.pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert not _group_alive(proc.pid), f"seed {seed}: processes of the group survived the kill"
                hits[installer][_hit(install_store(Workdir(workdir)), before, _headers(workdir))] += 1
                continue
            assert proc.returncode == 0, (
                f"seed {seed}: a run between kills failed: " + proc.stderr_path.read_text()[-3000:]
            )
            finished.append(workdir)
            round_ += 1
            workdir = tmp_path / f"{installer}-{round_}"
        final = source_stack.install(workdir, "--installer", installer)
        assert final.returncode == 0, f"seed {seed}: " + final.stderr[-3000:]
        finished.append(workdir)
    for workdir in finished:
        states = {n: r.state for n, r in install_store(Workdir(workdir)).load().steps.items()}
        assert set(states.values()) == {"done"} and "verify" in states, (seed, workdir, states)
        assert installed(workdir / "venv") == lock_versions(workdir), (seed, workdir)
    total = sum(sum(c.values()) for c in hits.values())
    print(
        f"\nsoak: seed {seed}, {total} SIGKILLs in {time.monotonic() - began:.0f} s, {len(finished)} installs converged"
    )
    for installer, counter in hits.items():
        print(f"  {installer}: " + ", ".join(f"{step} {n}" for step, n in counter.most_common()))
