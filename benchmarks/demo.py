"""Benchmark: the wall time of `ascend-setup demo` (the real pipeline against the simulated host, with a
SIGKILL mid-download and the resume). Target: under 60 s on this machine.

    .venv/bin/python benchmarks/demo.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from _common import clean_env, run


def main() -> None:
    env = clean_env(Path(tempfile.mkdtemp(prefix="bench-demo-")))
    for installer in ("pip", "uv"):
        start = time.perf_counter()
        proc = run([sys.executable, "-m", "ascend_setup", "demo", "--json", "--installer", installer], env)
        took = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        summary = json.loads(proc.stdout)
        print(
            f"demo with {installer}: {took:.1f} s wall (target < 60 s); resumed {summary['resumed']['step']} "
            f"from byte {summary['resumed']['kept_bytes']}; audit clean: {summary['audit']['ok']}"
        )


if __name__ == "__main__":
    main()
