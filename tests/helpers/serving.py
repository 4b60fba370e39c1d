"""A venv that serves on the simulated host, made in seconds: the stub vllm (its HTTP server), vllm-ascend with
0.23.0's ascend_config.py and envs.py, and triton-ascend, or upstream triton shadowing it (`shadowed=True`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ascend_setup.matrix import load_matrix
from ascend_setup.simulate.dists import build_wheel
from ascend_setup.simulate.ecosystem import TRITON_ASCEND_INIT, UPSTREAM_TRITON_INIT, plugin_wheel_files
from ascend_setup.simulate.stub_vllm import vllm_files

ROW = load_matrix().rows["9.1.0"]


def serving_venv(
    root: Path, *, shadowed: bool = False, vllm: str = ROW.packages["vllm"], plugin: str = ROW.packages["vllm-ascend"]
) -> Path:
    """`vllm` / `plugin`: the versions installed (a post release, a source build's +empty)."""
    wheels = root / "wheels"
    made = [
        build_wheel(wheels, "vllm", vllm, files=vllm_files(vllm)),
        build_wheel(wheels, "vllm-ascend", plugin, files=plugin_wheel_files(plugin)),
    ]
    made.append(
        build_wheel(wheels, "triton", "3.5.0", files={"triton/__init__.py": UPSTREAM_TRITON_INIT})
        if shadowed
        else build_wheel(
            wheels, "triton-ascend", ROW.packages["triton-ascend"], files={"triton/__init__.py": TRITON_ASCEND_INIT}
        )
    )
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--disable-pip-version-check",
            *map(str, made),
        ],
        check=True,
    )
    return venv
