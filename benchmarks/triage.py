"""Benchmark: `ascend-setup triage` of a 1 GiB log, as a user runs it (a child process: its wall time and its peak
RSS, from wait4). The log is the real COMPILE_CUSTOM_KERNELS=0 build output of the corpus repeated, with the real
dlog failure near its end (the cause buried under ~1 GiB, then pip's summaries), and a second log with no cause
at all (every line must be looked at).

    .venv/bin/python benchmarks/triage.py               # 1 GiB
    .venv/bin/python benchmarks/triage.py --mib 256

Targets: < 15 s and < 200 MB RSS for 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Tuple

from _common import REPO

LOGS = REPO / "tests" / "data" / "logs"


def make_log(path: Path, size: int, cause: bool) -> int:
    """Write about `size` bytes of real build output to `path` (with the dlog failure near the end when
    `cause`); returns the line number of the cause, or 0."""
    noise = (LOGS / "clean-compile-custom-kernels-0.log").read_bytes().split(b"\n", 1)[1]
    failure = (LOGS / "dlog-missing.log").read_bytes().split(b"\n", 1)[1]
    cause_at = 0
    with path.open("wb") as out:
        written, lines = 0, 0
        while written < size - len(failure) - len(noise):
            out.write(noise)
            written += len(noise)
            lines += noise.count(b"\n")
        if cause:
            head, _, _ = failure.partition(b"Could NOT find dlog")
            cause_at = lines + head.count(b"\n") + 1
            out.write(failure)
        else:
            out.write(noise)
    return cause_at


def triage_child(log: Path) -> Tuple[float, float, str]:
    """Wall seconds, peak RSS in MB, and the first line of the output of `ascend-setup triage --json LOG`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ascend_setup", "triage", "--json", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (Popen has not reaped it)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss / 1024, out.decode()


def one_pass(log: Path) -> float:
    """Seconds to read `log` and run one bytes.find over it: this machine's floor (triage makes one find per
    marker), so a figure measured under load can be compared with one measured on an idle host."""
    start = time.perf_counter()
    with log.open("rb") as stream:
        for block in iter(lambda: stream.read(8 << 20), b""):
            block.find(b"\x01")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="log size in MiB (default 1024)")
    args = parser.parse_args()
    size = args.mib << 20
    with tempfile.TemporaryDirectory(prefix="bench-triage-") as tmp:
        for cause in (True, False):
            log = Path(tmp) / ("buried-cause.log" if cause else "no-cause.log")
            expected = make_log(log, size, cause)
            floor = one_pass(log)
            wall, rss, out = triage_child(log)
            data = json.loads(out)
            found = f"{data['id']} at line {data['line_number']}" if data["id"] else "no cause"
            ok = (data["id"] == "dlog-missing" and data["line_number"] == expected) if cause else data["id"] is None
            print(f"{log.name}: {log.stat().st_size / 2**20:.0f} MiB, {found} ({'right' if ok else 'WRONG'}): "
                  f"{wall:.1f} s, peak RSS {rss:.0f} MB ({log.stat().st_size / 2**20 / wall:.0f} MiB/s); "
                  f"targets < 15 s, < 200 MB; one read+find pass here takes {floor:.1f} s ({wall / floor:.1f}x)")
            log.unlink()


if __name__ == "__main__":
    main()
