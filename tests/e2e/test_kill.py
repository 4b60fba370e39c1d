"""SIGKILL the install at 15+ moments (mid-download and mid-build included) and rerun each time."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import Callable, Dict, Optional

from e2e.conftest import freeze, kill_group
from ascend_setup.steps.state import StateStore

SDIST = "vllm_ascend-0.23.0.tar.gz"


def _headers(workdir: Path) -> Dict[str, int]:
    """How many attempts each step's log records (one '=== step: reason ===' line per run)."""
    logs = workdir / "logs"
    return {p.stem: len(re.findall(r"^=== ", p.read_text(), re.M)) for p in logs.glob("*.log")} if logs.exists() else {}


def _wait_for(predicate: Callable[[], bool], proc, timeout: float = 120) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _part_size(workdir: Path) -> int:
    part = workdir / "src" / f"{SDIST}.part"
    return part.stat().st_size if part.exists() else 0


def _compiled(workdir: Path) -> list:
    log = workdir / "src" / "vllm_ascend-0.23.0" / "build" / "compiled.log"
    return log.read_text().split() if log.exists() else []


class Driver:
    """Kills install attempts in one workdir until one finishes, checking every rule after each kill."""

    def __init__(self, stack, workdir: Path, rng: random.Random, targets: list, max_kills: int = 10) -> None:
        self.stack, self.workdir, self.rng, self.targets = stack, workdir, rng, targets
        self.max_kills = max_kills  # then the attempt may finish: a step longer than the kill window would starve
        self.store = StateStore(workdir / "state.json")
        self.kills = 0
        self.resumed_from: Optional[int] = None

    def attempt(self) -> bool:
        """One attempt; True when it ran to the end."""
        workdir = self.workdir
        done_before = {n for n, r in self.store.load().steps.items() if r.state == "done"} if workdir.exists() else set()
        headers_before = _headers(workdir)
        self.stack.main.requests.clear()
        proc = self.stack.spawn(workdir)
        target = self.targets[0] if self.targets and self.rng.random() < 0.5 else None
        hit = False
        if self.kills >= self.max_kills:
            target = None
            proc.wait(timeout=900)
        elif target == "download":
            hit = _wait_for(lambda: _part_size(workdir) > 200_000, proc)
        elif target == "build":
            hit = _wait_for(lambda: 1 <= len(_compiled(workdir)) < 6, proc)
        else:
            _wait_for(lambda: False, proc, timeout=self.rng.uniform(0.5, 6))
        if proc.poll() is None:
            kill_group(proc)
            self.kills += 1
            if target and hit:
                self.targets.remove(target)
                if target == "download":
                    self.resumed_from = _part_size(workdir)
        else:
            proc.wait(timeout=900)
        self.store.load()  # parses, whatever the moment of the kill
        after = _headers(workdir)
        reran = {s for s in done_before if after.get(s, 0) != headers_before.get(s, 0)}
        assert not reran, f"finished steps ran again: {reran}"
        if self.resumed_from and self.resumed_from > 0:
            ranged = [h for p, h in self.stack.main.requests if p.endswith(SDIST)]
            if ranged and "Range" in ranged[0]:
                assert ranged[0]["Range"] == f"bytes={self.resumed_from}-", ranged[0]
                self.resumed_from = -1  # seen: the download went on from its last byte
        assert proc.returncode in (-9, 0), proc.stderr_path.read_text()[-3000:]
        return proc.returncode == 0


def test_sigkill_anywhere_then_resume(source_stack, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert source_stack.install(reference).returncode == 0
    expected = freeze(reference / "venv")

    source_stack.main.behaviour.bytes_per_second = 1_500_000  # the 3 MB sdist takes about 2 s
    rng = random.Random(1130)
    targets = ["download", "build"]
    total, rounds = 0, 0
    try:
        while total < 15 or targets:
            rounds += 1
            assert rounds <= 4, (total, targets)
            driver = Driver(source_stack, tmp_path / f"killed-{rounds}", rng, targets)
            while not driver.attempt():
                pass
            total += driver.kills
            assert all(r.state == "done" for r in driver.store.load().steps.values())
            assert freeze(driver.workdir / "venv") == expected
            compiled = _compiled(driver.workdir)
            assert sorted(compiled, key=int) == [str(i) for i in range(1, 7)], compiled  # no stage twice
            if rounds == 1:
                assert driver.resumed_from == -1 or "download" in targets, "the download did not resume"
    finally:
        source_stack.main.behaviour.bytes_per_second = None
    print(f"{total} kills over {rounds} workdirs")
