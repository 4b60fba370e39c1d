"""The step engine: transitions, fingerprints, the lock, atomic state, and real SIGKILLs."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers.cli import REPO, clean_env
from pydantic import BaseModel

from ascend_setup.engine.run_files import RunFiles
from ascend_setup.engine.runlock import RunLock
from ascend_setup.engine.runner import Runner
from ascend_setup.engine.session import Session
from ascend_setup.engine.state import StateStore
from ascend_setup.engine.step import Step, fingerprint
from ascend_setup.errors import BadInput, LockHeld, StepFailed
from ascend_setup.utils.files import atomic_write_text

#: The engine knows no tool: each names its own state format (here a toy's).
TOY_FORMAT = "toy-state"


@dataclass
class ToySession(Session):
    options: Dict[str, Any] = field(default_factory=dict)


def toy_store(root: Path) -> StateStore:
    return StateStore(RunFiles(root).state, format=TOY_FORMAT, writer="the toy tool")


class Recorder(Step):
    """a step that writes a file and remembers each run"""

    def __init__(self, name: str, calls: List[str], depends_on=(), fail: bool = False, key: str = "v") -> None:
        self.name = name  # type: ignore[misc]
        self.depends_on = tuple(depends_on)  # type: ignore[misc]
        self.calls = calls
        self.fail = fail
        self.key = key

    def inputs(self, ctx):
        return {"key": ctx.options.get(self.name, self.key)}

    def is_done(self, ctx):
        return (ctx.root / f"{self.name}.out").exists()

    def run(self, ctx, log):
        self.calls.append(self.name)
        if self.fail:
            raise RuntimeError("boom")
        (ctx.root / f"{self.name}.out").write_text("ok")
        return {"value": self.name.upper()}


def make(tmp_path: Path, calls: List[str], options=None, fail=()) -> Runner:
    steps = [
        Recorder("a", calls, fail="a" in fail),
        Recorder("b", calls, ["a"], fail="b" in fail),
        Recorder("c", calls, ["b"], fail="c" in fail),
    ]
    return Runner(steps, ToySession(RunFiles(tmp_path), options=options or {}), toy_store(tmp_path))


def test_runs_once_then_skips(tmp_path: Path) -> None:
    calls: List[str] = []
    state = make(tmp_path, calls).run()
    assert calls == ["a", "b", "c"]
    assert {n: r.state for n, r in state.steps.items()} == {"a": "done", "b": "done", "c": "done"}
    assert state.steps["b"].outputs == {"value": "B"}
    make(tmp_path, calls).run()
    assert calls == ["a", "b", "c"]
    assert (tmp_path / "logs" / "a.log").exists()


def test_started_step_is_rerun(tmp_path: Path) -> None:
    calls: List[str] = []
    make(tmp_path, calls).run()
    store = toy_store(tmp_path)
    state = store.load()
    state.steps["b"].state = "started"
    store.save(state)
    make(tmp_path, calls).run()
    assert calls == ["a", "b", "c", "b"]


def test_changed_input_reruns_step_and_dependents(tmp_path: Path) -> None:
    calls: List[str] = []
    make(tmp_path, calls).run()
    decisions = make(tmp_path, [], options={"b": "new"}).plan()
    assert [d.run for d in decisions] == [False, True, True]
    assert "key: 'v' -> 'new'" in decisions[1].reason
    assert "depends on changed (b)" in decisions[2].reason
    make(tmp_path, calls, options={"b": "new"}).run()
    assert calls == ["a", "b", "c", "b", "c"]


def test_done_but_world_changed_reruns(tmp_path: Path) -> None:
    calls: List[str] = []
    make(tmp_path, calls).run()
    (tmp_path / "a.out").unlink()
    make(tmp_path, calls).run()
    assert calls == ["a", "b", "c", "a"]


def test_already_satisfied_is_recorded_without_running(tmp_path: Path) -> None:
    (tmp_path / "a.out").write_text("made by hand")
    calls: List[str] = []
    state = make(tmp_path, calls).run()
    assert calls == ["b", "c"] and state.steps["a"].state == "done"


def test_failure_is_recorded_and_reported(tmp_path: Path) -> None:
    calls: List[str] = []
    with pytest.raises(StepFailed) as err:
        make(tmp_path, calls, fail=("b",)).run()
    assert "step b failed: RuntimeError: boom" in err.value.message
    state = toy_store(tmp_path).load()
    assert state.steps["b"].state == "failed" and "boom" in state.steps["b"].error
    assert "c" not in state.steps
    make(tmp_path, calls).run()
    assert calls == ["a", "b", "b", "c"]


def test_fingerprint_is_stable_and_sensitive() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({"a": 1}, ("x",)) != fingerprint({"a": 1}, ("y",))


def test_dependencies_must_come_first(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Runner([Recorder("b", [], ["a"]), Recorder("a", [])], Session(RunFiles(tmp_path)))


@pytest.mark.parametrize(
    "content, words",
    [
        ("{not json", "is corrupt"),
        ('{"something": "else"}', "was not written by the toy tool"),
        ('{"format": "toy-state", "version": 1, "steps": {"a": {"state": "weird"}}}', "is invalid at steps.a"),
    ],
)
def test_corrupt_or_foreign_state_is_bad_input_and_kept(tmp_path: Path, content: str, words: str) -> None:
    (tmp_path / "state.json").write_text(content)
    with pytest.raises(BadInput) as err:
        make(tmp_path, []).run()
    assert words in err.value.message and "mv " in err.value.hint
    assert (tmp_path / "state.json").read_text() == content


def test_atomic_write_leaves_old_or_new(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    atomic_write_text(target, "old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_lock_is_exclusive_and_names_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time; sys.path.insert(0, sys.argv[2]);"
            "from pathlib import Path; from ascend_setup.engine.runlock import RunLock;"
            "l = RunLock(Path(sys.argv[1])); l.acquire(); print('locked', flush=True);"
            "time.sleep(30)",
            str(tmp_path / "lock"),
            str(REPO),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockHeld) as err:
            RunLock(tmp_path / "lock").acquire()
        assert f"pid {holder.pid}" in err.value.message
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path / "lock"):  # dies with its process: free again without any unlock
        pass


def test_second_install_exits_3(cli, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT);"
            "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode());"
            "print('locked', flush=True); time.sleep(30)",
            str(workdir / "run.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = cli("install", "--cann", "9.1.0", "--workdir", str(workdir), "--yes")
        assert proc.returncode == 3, proc.stderr
        assert f"pid {holder.pid}" in proc.stderr and "Traceback" not in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def _run_child(workdir: Path, home: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "helpers" / "crash_pipeline.py"), str(workdir)],
        env=clean_env(home),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _events(workdir: Path) -> List[str]:
    path = workdir / "events.log"
    return path.read_text().splitlines() if path.exists() else []


def test_sigkill_at_random_moments_resumes(tmp_path: Path, home: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    start = time.monotonic()
    child = _run_child(reference, home)
    assert child.wait(timeout=120) == 0, child.stderr.read()
    full = time.monotonic() - start

    rng = random.Random(20261130)
    kills = rounds = 0
    while kills < 20:
        rounds += 1
        # Each workdir is killed at least once (its first attempt outlives 0.6 of a full run, however
        # loaded the machine); the cap only catches a pipeline too quick to kill at all.
        assert rounds <= 40, "the pipeline was too quick to kill"
        workdir = tmp_path / f"killed-{rounds}"
        workdir.mkdir()
        store = StateStore(RunFiles(workdir).state, format="engine-state")
        while True:
            done_before = {n for n, r in store.load().steps.items() if r.state == "done"}
            seen = len(_events(workdir))
            child = _run_child(workdir, home)
            time.sleep(rng.uniform(0.05, 0.6 * full))
            finished = child.poll() is not None
            if not finished:
                os.killpg(child.pid, signal.SIGKILL)
                kills += 1
            child.wait(timeout=60)
            state = store.load()  # always parses, whatever the moment of the kill
            started = {line.split()[1] for line in _events(workdir)[seen:]}
            assert not started & done_before, f"finished steps ran again: {started & done_before}"
            if finished:
                assert child.returncode == 0, child.stderr.read()
                break
        assert all(r.state == "done" for r in state.steps.values()) and len(state.steps) == 3
        assert (workdir / "report.txt").read_text() == (reference / "report.txt").read_text()


def test_the_engine_imports_nothing_of_the_domain() -> None:
    """engine/ runs any steps: it may use the ground floor (errors, files, the disk-full check, the redaction of a
    message it records) and itself only."""
    import ast

    allowed = {
        "ascend_setup.engine",
        "ascend_setup.errors",
        "ascend_setup.utils.files",
        "ascend_setup.utils.diskfull",
        "ascend_setup.utils.inputs",
        "ascend_setup.utils.redact",
    }
    for path in (REPO / "ascend_setup" / "engine").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                if name.startswith("ascend_setup"):
                    assert any(name == a or name.startswith(a + ".") for a in allowed), f"{path.name} imports {name}"


class Count(BaseModel):
    count: int


class Counter(Step[Count]):
    """a step whose output is typed: the next run reads it back as a Count"""

    name = "counter"
    Output = Count

    def is_done(self, ctx):
        return ctx.has(self) and (ctx.root / "count").exists()

    def run(self, ctx, log):
        (ctx.root / "count").write_text("3")
        return Count(count=3)


class Reader(Step):
    """reads the counter's output through its model"""

    name = "reader"
    depends_on = ("counter",)

    def is_done(self, ctx):
        return False

    def run(self, ctx, log):
        return {"seen": ctx.get(Counter).count + 1}


def test_outputs_are_typed_and_read_back_from_the_state_file(tmp_path: Path) -> None:
    def runner() -> Runner:
        return Runner([Counter(), Reader()], Session(RunFiles(tmp_path)), toy_store(tmp_path))

    state = runner().run()
    assert state.steps["counter"].outputs == {"count": 3} and state.steps["reader"].outputs == {"seen": 4}
    again = runner()
    again.run()
    assert again.ran == ["reader"] and isinstance(again.session.get(Counter), Count)
    # a record its model cannot read counts as never made: the step's own check decides, and it runs again
    store = toy_store(tmp_path)
    state = store.load()
    state.steps["counter"].outputs = {"count": "many"}
    store.save(state)
    third = runner()
    third.run()
    assert third.ran == ["counter", "reader"]
