"""The audit's fix plan on a real, broken venv: each step leaves the venv importable, and the audit
after the last one is clean."""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path

from helpers.cli import clean_env
from helpers.stack import installed

IMPORTS = "import torch, torch_npu, xgrammar, triton, vllm, vllm_ascend"


def _pip(venv: Path, *args: str) -> None:
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        check=True,
        env=clean_env(venv.parent),
        capture_output=True,
    )


def _imports(venv: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", IMPORTS], capture_output=True, text=True, env=clean_env(venv.parent)
    )


def test_the_fix_plan_never_breaks_imports_and_ends_clean(wheel_stack, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    proc = wheel_stack.install(workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    venv = workdir / "venv"
    main = wheel_stack.main.url
    # Break it as the field did: the index's own torch (the CUDA build on x86_64, with its nvidia-* wheels),
    # upstream triton over triton-ascend, a CANN compiler dependency gone, system site-packages on.
    if platform.machine() == "x86_64":
        _pip(
            venv,
            "--index-url",
            main,
            "--no-deps",
            "--force-reinstall",
            "torch==2.10.0",
            "nvidia-cublas-cu12",
            "nvidia-cudnn-cu12",
        )
    else:
        _pip(venv, "--index-url", main, "--no-deps", "torch==2.11.0")
    _pip(venv, "--index-url", main, "--no-deps", "triton==3.5.0")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", "decorator"],
        check=True,
        env=clean_env(tmp_path),
    )
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(
        cfg.read_text().replace("include-system-site-packages = false", "include-system-site-packages = true")
    )
    assert _imports(venv).returncode == 0  # broken for vLLM-Ascend, but every module still imports

    audit = wheel_stack.cli("audit", "--venv", str(venv), "--json")
    report = json.loads(audit.stdout)
    assert audit.returncode == 1 and report["fix_plan"], audit.stdout
    ids = {f["id"] for f in report["findings"]}
    assert {"triton-upstream", "cann-dep-missing", "system-site-packages"} <= ids
    assert ("cuda-torch" in ids) == (platform.machine() == "x86_64")
    plan = report["fix_plan"]
    assert plan[0].startswith("sed -i")  # system site-packages off before any pip step
    assert not any(" triton==" in step for step in plan)  # no step ever installs upstream triton
    assert "triton-ascend==3.2.2" in plan[-1] and wheel_stack.ascend.url in plan[-1]
    for number, step in enumerate(plan, 1):
        done = subprocess.run(step, shell=True, capture_output=True, text=True, env=clean_env(tmp_path))
        assert done.returncode == 0, (number, step, done.stderr[-2000:])
        imported = _imports(venv)
        assert imported.returncode == 0, (number, step, imported.stderr[-2000:])
    again = wheel_stack.cli("audit", "--venv", str(venv), "--json")
    assert again.returncode == 0, again.stdout
    versions = installed(venv)
    assert "triton" not in versions and not [n for n in versions if n.startswith("nvidia-")]
    assert versions["torch"] == ("2.10.0+cpu" if platform.machine() == "x86_64" else "2.10.0")
