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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ASCEND_", "UV_"))}
    env.update({"HOME": str(home), "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PYTHONPATH": str(REPO), "NO_COLOR": "1"})
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
    """The stub 9.1.0 stack on three loopback indexes: (matrix with them named, ecosystem, (main, Ascend,
    PyTorch CPU))."""
    from ascend_setup.matrix import load_matrix
    from helpers.ecosystem import build_ecosystem
    from helpers.index_server import LocalIndex

    matrix = load_matrix()
    row = matrix.rows["9.1.0"]
    eco = build_ecosystem(tmp / "eco", dict(row.packages), dict(row.cann_python_deps))
    indexes = (LocalIndex(), LocalIndex(), LocalIndex())
    for index, directory in zip(indexes, (eco.main, eco.ascend, eco.pytorch_cpu)):
        index.add_dir(directory)
    named = matrix.with_indexes({"ascend": indexes[1].url, "pytorch-cpu": indexes[2].url})
    return named, eco, indexes


def index_args(indexes) -> List[str]:
    """install/plan flags for the three loopback indexes of `serve_stack`."""
    main_index, ascend_index, cpu_index = indexes
    return ["--index-url", main_index.url, "--index", f"ascend={ascend_index.url}", "--index",
            f"pytorch-cpu={cpu_index.url}"]
