"""`ascend-setup install` end to end on loopback: the whole pipeline from one lock, then a rerun that
does nothing; the wheel path with uv; a CANN mismatch."""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path

import pytest
from helpers.stack import freeze, installed, lock_versions, status

from ascend_setup.steps.pipeline import build_pipeline

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland

STEPS = len(build_pipeline())
#: What the row's torch is on this host: the `+cpu` build from the PyTorch CPU index on x86_64.
TORCH = "2.10.0+cpu" if platform.machine() == "x86_64" else "2.10.0"


def test_install_builds_from_source_and_verifies(source_stack, tmp_path: Path) -> None:
    """With pip (uv is the default, and the wheel test below takes it): the whole pipeline holds for both."""
    workdir = tmp_path / "wd"
    start = time.monotonic()
    proc = source_stack.install(workdir, "--installer", "pip")
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-4000:]
    data = status(source_stack, workdir)
    assert [s["state"] for s in data["steps"]] == ["done"] * STEPS, data
    venv = workdir / "venv"
    # the venv holds the lock, exactly: every package at the locked version, nothing more
    assert installed(venv) == lock_versions(workdir)
    frozen = freeze(venv)
    assert "vllm-ascend @ vllm_ascend-0.23.0-py3-none-any.whl" in frozen and f"torch=={TORCH}" in frozen
    assert "torch-npu==2.10.0.post4" in frozen and "transformers==5.5.4" in frozen and "triton-ascend==3.2.2" in frozen
    assert not any(line.startswith(("triton==", "flashinfer", "nvidia-", "tilelang", "cuda-")) for line in frozen)
    # versions that caps two levels down decide, not the newest that fits the direct requirement
    assert {"numpy==2.3.5", "tokenizers==0.22.2", "prometheus-fastapi-instrumentator==7.1.0"} <= set(frozen)
    wheelhouse = list((workdir / "wheelhouse").glob("vllm_ascend-0.23.0-cann9.1.0-*-ascend910b3/*.whl"))
    assert len(wheelhouse) == 1
    plugin_log = (workdir / "logs" / "vllm-ascend.log").read_text()
    assert "[100%] Building CXX object" in plugin_log and "SOC ascend910b3" in plugin_log
    derived = (workdir / "logs" / "resolve.log").read_text()
    assert "OUT torch==2.10.0" in derived and "CUDA-only: stripped by the row" in derived
    assert "IN  transformers==5.5.4" in derived and "vllm-ascend: transformers==5.5.4" in derived
    assert "fastapi[standard]<0.124.0,<0.137,>=0.115.0" in derived  # the plugin's bound meets vllm's
    deps_log = (workdir / "logs" / "plugin-deps.log").read_text()
    assert "installer: pip" in deps_log and "-m pip install" in deps_log and "--require-hashes" in deps_log
    root = source_stack.cann.root
    assert f"source {root}/cann/set_env.sh" in proc.stdout and f"source {root}/nnal/atb/set_env.sh" in proc.stdout
    assert f"source {workdir}/venv/bin/activate" in proc.stdout and "fuse_qknorm_rope" in proc.stdout
    audit = source_stack.cli("audit", "--venv", str(venv), "--json")
    assert audit.returncode == 0, audit.stdout
    assert json.loads(audit.stdout)["row"] == "9.1.0"

    again_start = time.monotonic()
    again = source_stack.install(workdir, "--installer", "pip")
    again_took = time.monotonic() - again_start
    assert again.returncode == 0
    assert again.stderr.count("(done)") == STEPS, again.stderr
    assert freeze(venv) == frozen
    assert "=== resolve" not in (workdir / "logs" / "resolve.log").read_text().split("=== resolve", 1)[1]
    dry = json.loads(source_stack.cli(*source_stack.install_argv(workdir, "--dry-run", "--json")[3:]).stdout)
    assert dry["closure"]["lock"] == str(next((workdir / "lock").glob("*.txt")))
    assert dry["closure"]["summary"]["packages"] == len(lock_versions(workdir))
    assert {p["name"] for p in dry["closure"]["not_wheels"]} == {"vllm-ascend", "arctic-inference"}
    resumed = source_stack.cli("resume", "--workdir", str(workdir), "--json")
    assert resumed.returncode == 0 and all(s["state"] == "done" for s in json.loads(resumed.stdout)["steps"])

    # someone removes vllm-ascend by hand: the check notices, and the kept wheel is reused (no rebuild)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "vllm-ascend"], capture_output=True, check=True
    )
    repaired = source_stack.install(workdir)
    assert repaired.returncode == 0 and "vllm-ascend" in repaired.stderr
    log = (workdir / "logs" / "vllm-ascend.log").read_text()
    assert log.count("Building CXX object") == 6 and "reusing " in log
    assert freeze(venv) == frozen
    print(f"install: {took:.1f}s, rerun with nothing to do: {again_took:.1f}s")


def test_install_takes_the_wheel_with_uv_the_default(wheel_stack, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    preview = wheel_stack.cli(*wheel_stack.install_argv(workdir, "--dry-run")[3:])
    assert preview.returncode == 0 and "resolved now; the resolve step writes the lock" in preview.stdout
    assert "0 unavailable" in preview.stdout and not workdir.exists()
    proc = wheel_stack.install(workdir)
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = (workdir / "logs" / "vllm-ascend.log").read_text()
    assert "forecast: wheel" in log and "installer: uv" in log and "uv pip install" in log
    assert "Building CXX" not in log and "--require-hashes" in (workdir / "logs" / "plugin-deps.log").read_text()
    assert not (workdir / "wheelhouse").exists()
    assert installed(workdir / "venv") == lock_versions(workdir)
    frozen = freeze(workdir / "venv")
    assert "vllm-ascend==0.23.0" in frozen and f"torch=={TORCH}" in frozen and "transformers==5.5.4" in frozen
    assert not any(line.startswith(("triton==", "nvidia-")) for line in frozen)
    assert wheel_stack.cli("audit", "--venv", str(workdir / "venv")).returncode == 0


def test_cann_mismatch_stops_with_the_fix(source_stack, tmp_path: Path) -> None:
    from ascend_setup.simulate.fake_cann import build_fake_cann

    other = build_fake_cann(tmp_path / "Ascend", version="9.0.1")
    proc = source_stack.install(tmp_path / "wd", "--cann-home", str(other.root))
    assert proc.returncode == 1
    assert "CANN 9.0.1 is installed" in proc.stderr and "--cann 9.0.1" in proc.stderr
    assert "Traceback" not in proc.stderr
    data = status(source_stack, tmp_path / "wd")
    assert data["steps"][0]["state"] == "failed" and data["steps"][1]["state"] == "pending"


def test_preflight_names_every_blocking_problem_at_once(source_stack, tmp_path: Path) -> None:
    """No CANN and a --python outside the row's range: both are said, and the log holds them."""
    empty = tmp_path / "no-cann"
    empty.mkdir()
    proc = source_stack.install(tmp_path / "wd", "--cann-home", str(empty), "--python", "/nonexistent/python3.11")
    assert proc.returncode == 2 and "does not exist" in proc.stderr  # a bad flag is refused before anything
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    proc = source_stack.install(tmp_path / "wd", "--cann-home", str(empty))
    assert proc.returncode == 1, proc.stderr
    assert "no CANN toolkit found (looked in" in proc.stderr and "Ascend-cann-toolkit_9.1.0_linux-" in proc.stderr
    assert "ascend-setup doctor" in proc.stderr and "ascend-setup plan" in proc.stderr
    log = (tmp_path / "wd" / "logs" / "preflight.log").read_text()
    assert "problem: no CANN toolkit found" in log and "fix: install CANN 9.1.0" in log
