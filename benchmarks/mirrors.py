"""Benchmark: our mirror ranking vs the sequential `curl -m 8` per mirror method, on the same shaped
loopback mirrors (fast, medium, 300 kB/s crawler, refused, stall, 404, stale, garbage) plus 4 black
holes (ports that accept connections and never answer). Prints the wall time against the budget and
against curl. Targets: >= 10x faster than curl, never more than 0.5 s over the budget.

    .venv/bin/python benchmarks/mirrors.py
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import clean_env  # (importing _common puts the repo and tests on sys.path)
from helpers.mirror_farm import build_farm

from ascend_setup.index.tags import Target
from ascend_setup.matrix import load_matrix
from ascend_setup.mirrors.rank import gated_packages, rank_mirrors
from ascend_setup.simulate.index_server import BlackHole

TRUE_RATE = {"fast": None, "medium": 6_000_000, "crawler": 300_000}


BUDGET = 5.0


def curl_method(urls, sample: str) -> tuple:
    """What the best-known switcher does: one big file per mirror, `curl -m 8`, one after another,
    the highest average speed wins whatever the status code."""
    start = time.monotonic()
    speeds = {}
    for url in urls:
        base = url[: -len("simple/")]
        out = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-m", "8", "-w", "%{speed_download}", f"{base}files/{sample}"],
            capture_output=True,
            text=True,
        )
        speeds[url] = float(out.stdout or 0)
    return max(speeds, key=speeds.get), time.monotonic() - start


def main() -> None:
    row = load_matrix().rows["9.1.0"]
    row = row.for_arch(platform.machine())
    farm = build_farm(Path(tempfile.mkdtemp(prefix="bench-mirrors-")), gated_packages(row), platform.machine())
    holes = [BlackHole() for _ in range(4)]
    urls = farm.urls() + [h.url for h in holes]
    try:
        target = Target(glibc="2.31", arch=platform.machine(), python="3.11")
        start = time.monotonic()
        ranking = rank_mirrors(urls, row, target, budget=BUDGET)
        ours = time.monotonic() - start
        theirs_choice, theirs = curl_method(urls, ranking.sample)
        measured = {farm.shape_of(m.url): m.throughput_bps or 0 for m in ranking.mirrors if m.url in farm.urls()}
        best = max(measured.values())

        def fraction(url: str) -> str:
            if url not in farm.urls():
                return "a black hole: not a usable mirror (0% of the best)"
            shape = farm.shape_of(url)
            if shape not in TRUE_RATE:
                return f"{shape}: not a usable mirror (0% of the best)"
            return f"{shape}: {measured.get(shape, 0) / best:.0%} of the best"

        print(
            f"mirrors: {len(urls)} (fast, medium, 300 kB/s crawler, refused, stall, 404, stale, garbage, 4 black holes)"
        )
        print(
            f"ours:      {ours:6.2f} s  chose {fraction(ranking.chosen)}  (budget {BUDGET:.1f} s, "
            f"{ours - BUDGET:+.2f} s over)"
        )
        print(f"curl -m 8: {theirs:6.2f} s  chose {fraction(theirs_choice)}")
        print(f"wall-time ratio curl/ours: {theirs / ours:.1f}x")
        for m in ranking.mirrors:
            shape = farm.shape_of(m.url) if m.url in farm.urls() else "hole"
            print(f"  {shape:8} {m.status:8} ttfb={m.ttfb_s} bps={m.throughput_bps} {m.detail}")
        # The command as a user runs it (interpreter start-up, imports, rendering and exit included), and the
        # shaped mirrors alone (no black holes, which only cost curl its -m 8 each).
        argv = [sys.executable, "-m", "ascend_setup", "mirrors", "--budget", f"{BUDGET:g}", "--only", "--json"]
        for url in farm.urls():
            argv += ["--candidate", url]
        walls = []
        with tempfile.TemporaryDirectory(prefix="bench-mirrors-home-") as home:
            env = clean_env(Path(home))
            for _ in range(3):
                start = time.monotonic()
                proc = subprocess.run(argv, capture_output=True, text=True, env=env)
                walls.append(time.monotonic() - start)
                assert proc.returncode == 0, proc.stdout + proc.stderr
        chosen = json.loads(proc.stdout)["chosen"]
        _, curl_shaped = curl_method(farm.urls(), ranking.sample)
        print(
            f"ascend-setup mirrors --budget {BUDGET:g} on the {len(farm.urls())} shaped mirrors, whole command: "
            f"{', '.join(f'{w:.2f}' for w in walls)} s (goal <= {BUDGET + 0.5:.1f} s), chose {fraction(chosen)}"
        )
        print(
            f"curl -m 8 on the same {len(farm.urls())}: {curl_shaped:.2f} s; ratio curl/ours "
            f"{curl_shaped / max(walls):.1f}x-{curl_shaped / min(walls):.1f}x (goal >= 4x)"
        )
    finally:
        farm.close()
        for hole in holes:
            hole.close()


if __name__ == "__main__":
    main()
