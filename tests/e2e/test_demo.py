"""`ascend-setup demo`: the real pipeline against the simulated host (the same world these tests use),
stopped partway, resumed, audited; and nothing left behind, Ctrl-C included."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import clean_env
from helpers.processes import processes_mentioning as _processes_mentioning

from ascend_setup.steps.pipeline import build_pipeline

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_the_demo_tells_the_whole_story(home: Path, installer: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "demo", "--json", "--installer", installer],
        capture_output=True,
        text=True,
        env=clean_env(home),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["simulated"] is True and summary["installer"] == installer
    assert [s["state"] for s in summary["steps"]] == ["done"] * len(summary["steps"])
    assert len(summary["steps"]) == len(build_pipeline())
    resumed = summary["resumed"]
    assert summary["interrupted_at"] == "download" and resumed["step"] == "vllm-ascend" and resumed["kept_bytes"] > 0
    assert resumed["continued_with"] == f"bytes={resumed['kept_bytes']}-"  # the download went on from its last byte
    assert summary["audit"]["ok"] and summary["audit"]["errors"] == 0
    assert any("fuse_qknorm_rope" in h for h in summary["hints"])
    assert not Path(summary["workdir"]).exists()  # a temporary workdir of its own, removed
    assert "[simulated]" in proc.stderr
    served = summary["serve"]  # the ending: a tiny simulated model served, answered, measured, stopped
    # The stub streams at the simulated 910B3's rate for the model's bytes, which fit predicts: ratio about 1.
    assert served["answer"] == "Paris." and served["stopped"] and abs(served["ratio"] - 1) < 0.1
    assert served["tpot_ms"] > 0 and served["tpot_p90_ms"] >= served["tpot_ms"]
    swept = served["bench"]  # and before the stop, a short bench sweep at three levels, labelled simulated
    assert [lv["concurrency"] for lv in swept["levels"]] == [1, 4, 16] and swept["reasons"] == []
    assert swept["client"] == "ascend-setup's client"  # the simulated venv's vllm has no benchmark
    tok_s = [lv["output_tok_s"] for lv in swept["levels"]]
    assert tok_s[0] < tok_s[1] < tok_s[2] and 0 < swept["seconds"] < 60
    assert "[simulated] $ ascend-setup bench tiny-qwen3" in proc.stderr


def test_ctrl_c_leaves_no_server_and_no_process(home: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ascend_setup", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(home),
    )
    first = proc.stderr.readline()  # said before anything: the workdir, and that it goes at the end
    assert "removed at the end (--keep keeps it)" in first, first
    workdir = Path(re.search(r"host in (\S+)/host:", proc.stderr.readline()).group(1))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (workdir / "install" / "state.json").exists():
        time.sleep(0.05)
    time.sleep(1.0)  # the install is at work: pip or the resolver is running
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted by SIGINT" in err, err[-2000:]
    assert _processes_mentioning(str(workdir)) == []
    assert not workdir.exists()  # its own temporary workdir goes on Ctrl-C too


def test_interrupt_at_refuses_a_step_it_cannot_interrupt(cli) -> None:
    from helpers.cli import assert_one_line_error

    line = assert_one_line_error(cli("demo", "--interrupt-at", "verify"))
    assert "over too soon" in line and "download" in line


def test_the_demo_checks_its_own_disk_need_and_its_row_says_it(tmp_path: Path, monkeypatch) -> None:
    from ascend_setup.errors import StepFailed
    from ascend_setup.matrix.load import parse_matrix
    from ascend_setup.simulate import story as demo

    matrix = demo.simulated_matrix(tmp_path / "host")
    row = parse_matrix(matrix.read_text(), str(matrix)).rows[demo.CANN]
    assert row.disk_gib * 1024**3 == pytest.approx(demo.DISK_NEED, rel=0.05)  # not the real row's 40 GiB
    monkeypatch.setattr(demo, "free_disk_bytes", lambda path: demo.DISK_NEED - 1)
    with pytest.raises(StepFailed, match="the demo needs 200 MB"):
        demo.check_disk(tmp_path)


def test_the_simulated_torch_runs_the_probe_the_demo_recommends(tmp_path: Path) -> None:
    from ascend_setup.fit.probe import run_probe
    from ascend_setup.simulate.ecosystem import torch_files

    for name, text in torch_files("2.10.0", cuda=None).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    result = run_probe(Path(sys.executable), "cpu", 4 * 1024 * 1024, env={"PYTHONPATH": str(tmp_path)})
    assert result["backend"] == "torch" and result["gbps"] > 0
