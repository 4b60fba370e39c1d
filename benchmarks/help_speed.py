"""Benchmark: each command's `--help` against `pip install --help`, with the same interpreter, in one run. A
command's help is what a newcomer runs first, and it is only the parser: a command imports what it runs with when
it runs. Prints, per command, the median wall time of N runs and its ratio to pip's, the median CPU time (user +
system: what a loaded host inflates least) and its ratio, and the modules it loads (counted from
`-X importtime`), beside the interpreter alone.

    .venv/bin/python benchmarks/help_speed.py            # 9 runs of each
    .venv/bin/python benchmarks/help_speed.py --runs 21 install status

Target: `install --help` and `status --help` within 1.2x of `pip install --help` (wall time). The runs go in
turns (every command once, then again), so a busy moment of a shared host weighs on all of them alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from _common import clean_env, run

from ascend_setup.cli.main import COMMANDS

PIP = "pip install"
PYTHON = "(the interpreter alone)"
TARGET = 1.2
JUDGED = ("install", "status")


def argv_of(name: str) -> List[str]:
    if name == PIP:
        return [sys.executable, "-m", "pip", "install", "--help"]
    if name == PYTHON:
        return [sys.executable, "-c", "pass"]
    return [sys.executable, "-m", "ascend_setup", name, "--help"]


def modules_loaded(argv: List[str], env: Dict[str, str]) -> int:
    """How many modules one run imports: the lines `-X importtime` writes, less its header. The command's own
    module and `ascend_setup.commands` are not among them (importlib.import_module loads them out of the
    timer's sight; what they import is counted)."""
    proc = run([argv[0], "-X", "importtime", *argv[1:]], env)
    return sum(1 for line in proc.stderr.splitlines() if line.startswith("import time:")) - 1


def timed_run(argv: List[str], env: Dict[str, str]) -> Tuple[float, float]:
    """Wall seconds and CPU seconds (the child's user + system) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = run(argv, env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs of each command (default 9; the median is shown)")
    parser.add_argument("commands", nargs="*", metavar="COMMAND", help="the commands to time (default: all)")
    args = parser.parse_args()
    names = [PYTHON, PIP, *(args.commands or COMMANDS)]
    with tempfile.TemporaryDirectory(prefix="bench-help-") as home:
        env = clean_env(Path(home))
        for name in names:  # once untimed: bytecode compiled, files in the page cache
            timed_run(argv_of(name), env)
        runs: Dict[str, List[Tuple[float, float]]] = {name: [] for name in names}
        for _ in range(args.runs):
            for name in names:
                runs[name].append(timed_run(argv_of(name), env))
        counts = {name: modules_loaded(argv_of(name), env) for name in names}
    wall = {name: statistics.median(w for w, _ in r) for name, r in runs.items()}
    cpu = {name: statistics.median(c for _, c in r) for name, r in runs.items()}
    print(f"{'':<36} {'wall':>7} {'x pip':>6} {'CPU':>7} {'x pip':>6} {'modules':>8}")
    for name in names:
        label = name if name == PYTHON else f"{'' if name == PIP else 'ascend-setup '}{name} --help"
        print(
            f"{label:<36} {wall[name]:>6.3f}s {wall[name] / wall[PIP]:>5.2f}x "
            f"{cpu[name]:>6.3f}s {cpu[name] / cpu[PIP]:>5.2f}x {counts[name]:>8}"
        )
    for name in (n for n in JUDGED if n in wall):
        ratio = wall[name] / wall[PIP]
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"{name} --help: {ratio:.2f}x pip install --help (target {TARGET}x: {verdict})")
    print(
        f"{args.runs} runs each, in turns; Python {sys.version.split()[0]}; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
