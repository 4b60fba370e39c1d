"""The device type decides vllm-ascend's wheel, end to end: an A3 host whose glibc takes the published
(A2) wheel builds from source instead; audit catches an A2 wheel on an A3 host; preflight names every
missing piece of the source build's toolchain at once, before anything is downloaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import clean_env

from ascend_setup.host.machine import glibc_version
from ascend_setup.resolve.lockfile import read_lock
from ascend_setup.simulate.fake_cann import build_fake_cann

pytestmark = pytest.mark.skipif(
    tuple(map(int, (glibc_version() or "0.0").split("."))) < (2, 34),
    reason="the published wheels need glibc 2.34: this host could not take them anyway",
)


def test_a3_host_builds_from_source_and_not_the_a2_wheel(wheel_stack, tmp_path: Path) -> None:
    a3 = build_fake_cann(tmp_path / "Ascend", board="A3")
    workdir = tmp_path / "wd"
    proc = wheel_stack.install(workdir, "--cann-home", str(a3.root))
    assert proc.returncode == 0, proc.stderr[-4000:]
    preflight = (workdir / "logs" / "preflight.log").read_text()
    assert "soc: ascend910_9391" in preflight and "device_type: A3" in preflight
    assert "built for A2 NPUs and this host's are A3" in preflight and "ok   g++" in preflight
    log = (workdir / "logs" / "vllm-ascend.log").read_text()
    assert "forecast: sdist" in log and "the published wheel is built for A2 NPUs and the target is A3" in log
    assert "SOC ascend910_9391" in log and "Building CXX object" in log
    assert len(list((workdir / "wheelhouse").glob("vllm_ascend-0.23.0-*-ascend910_9391/*.whl"))) == 1
    (lock_file,) = (workdir / "lock").glob("*.txt")
    lock = read_lock(lock_file)
    assert lock.target.device == "A3"
    assert next(p for p in lock.packages if p.name == "vllm-ascend").outcome == "sdist"
    audit = wheel_stack.cli(
        "audit", "--venv", str(workdir / "venv"), "--json", env={"ASCEND_SETUP_CANN_HOME": str(a3.root)}
    )
    assert "device-type" not in {f["id"] for f in json.loads(audit.stdout)["findings"]}, audit.stdout


def test_audit_catches_the_published_a2_wheel_on_an_a3_host(wheel_stack, tmp_path: Path) -> None:
    """The stub index's wheel, installed by real pip, as an A2 wheel lands on an A3 host by hand."""
    wheel = next(wheel_stack.host.eco.main.glob("vllm_ascend-0.23.0-cp311-*x86_64*.whl"), None) or next(
        wheel_stack.host.eco.main.glob("vllm_ascend-0.23.0-*.whl")
    )
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--ignore-requires-python",
            "--no-compile",
            str(wheel),
        ],
        check=True,
        env=clean_env(tmp_path),
        capture_output=True,
    )
    a3 = build_fake_cann(tmp_path / "Ascend", board="A3")
    proc = wheel_stack.cli(
        "audit", "--venv", str(venv), "--cann", "9.1.0", "--json", env={"ASCEND_SETUP_CANN_HOME": str(a3.root)}
    )
    assert proc.returncode == 1
    (finding,) = [f for f in json.loads(proc.stdout)["findings"] if f["id"] == "device-type"]
    assert "built for A2 NPUs" in finding["message"] and "A3" in finding["message"]
    assert "--soc ascend910_9391" in finding["fix"] and "__device_type__ = 'A2'" in finding["evidence"]
    a2 = build_fake_cann(tmp_path / "Ascend-a2", board="A2")
    proc = wheel_stack.cli(
        "audit", "--venv", str(venv), "--cann", "9.1.0", "--json", env={"ASCEND_SETUP_CANN_HOME": str(a2.root)}
    )
    assert "device-type" not in {f["id"] for f in json.loads(proc.stdout)["findings"]}


def test_preflight_names_every_missing_toolchain_piece_at_once(wheel_stack, tmp_path: Path) -> None:
    """An A3 host (so a source build) with gcc 7.3, no g++ and a toolkit without bisheng or setenv.bash."""
    a3 = build_fake_cann(tmp_path / "Ascend", board="A3", toolchain=False)
    gcc = tmp_path / "gcc-7.3"
    gcc.write_text("#!/bin/sh\necho 7.3.0\n")
    gcc.chmod(0o755)
    workdir = tmp_path / "wd"
    proc = wheel_stack.install(
        workdir, "--cann-home", str(a3.root), env={"C_COMPILER": str(gcc), "CXX_COMPILER": str(tmp_path / "no-g++")}
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "4 problems" in proc.stderr, proc.stderr
    for piece in ("gcc: ", "7.3.0", "g++: no ", "bisheng: no bisheng", "setenv.bash: no "):
        assert piece in proc.stderr, piece
    assert "Traceback" not in proc.stderr
    log = (workdir / "logs" / "preflight.log").read_text()
    assert log.count("problem: ") == 4 and "FAIL bisheng" in log
    assert not (workdir / "venv").exists() and not (workdir / "src").exists()  # nothing downloaded
