"""Shared by the benchmarks: the repo on sys.path, the test helpers, a clean environment, timing."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def clean_env(home: Path) -> Dict[str, str]:
    # PYTHONDONTWRITEBYTECODE off: an installed tool runs from bytecode (pip compiles it), not from source
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "ASCEND_", "UV_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        {
            "HOME": str(home),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PYTHONPATH": str(REPO),
            "NO_COLOR": "1",
        }
    )
    return env


def timed(fn: Callable[[], object], repeat: int = 3) -> Tuple[float, object]:
    """Median wall time of `repeat` calls, and the last result."""
    times: List[float] = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run(argv: List[str], env: Dict[str, str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, **kw)


def serve_stack(tmp: Path):
    """The simulated host (the one the demo and the tests use): (matrix with its indexes named, host)."""
    from ascend_setup.host.machine import glibc_version
    from ascend_setup.matrix import load_matrix
    from ascend_setup.simulate.world import start_simulated_host

    matrix = load_matrix()
    # vllm-ascend as a wheel this machine takes: the benchmarks time the tool, not the stub's source build
    host = start_simulated_host(
        tmp / "host",
        matrix.rows["9.1.0"],
        plugin_wheel_arches=("x86_64", "aarch64"),
        plugin_wheel_glibc=glibc_version() or "2.17",
    )
    return matrix.with_indexes({"ascend": host.ascend.url, "pytorch-cpu": host.pytorch_cpu.url}), host
