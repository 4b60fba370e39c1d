"""Benchmark: our mirror ranking vs the sequential `curl -m 8` per mirror method, on the same shaped
loopback mirrors (fast, medium, 300 kB/s crawler, refused, stall, 404, stale, garbage).

    python benchmarks/mirrors.py
"""

from __future__ import annotations

import platform
import subprocess
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo and tests on sys.path)

from ascend_setup.index.tags import Target  # noqa: E402
from ascend_setup.matrix import load_matrix  # noqa: E402
from ascend_setup.mirrors.rank import gated_packages, rank_mirrors  # noqa: E402
from helpers.mirror_farm import build_farm  # noqa: E402

TRUE_RATE = {"fast": None, "medium": 6_000_000, "crawler": 300_000}


def curl_method(farm, sample: str) -> tuple:
    """What the best-known switcher does: one big file per mirror, `curl -m 8`, one after another,
    the highest average speed wins whatever the status code."""
    start = time.monotonic()
    speeds = {}
    for url in farm.urls():
        base = url[: -len("simple/")]
        out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-m", "8", "-w", "%{speed_download}",
                              f"{base}files/{sample}"], capture_output=True, text=True)
        speeds[url] = float(out.stdout or 0)
    return max(speeds, key=speeds.get), time.monotonic() - start


def main() -> None:
    row = load_matrix().rows["9.1.0"]
    farm = build_farm(Path(tempfile.mkdtemp(prefix="bench-mirrors-")), gated_packages(row), platform.machine())
    try:
        target = Target(glibc="2.31", arch=platform.machine(), python="3.11")
        start = time.monotonic()
        ranking = rank_mirrors(farm.urls(), row, target, budget=5.0)
        ours = time.monotonic() - start
        theirs_choice, theirs = curl_method(farm, ranking.sample)
        measured = {farm.shape_of(m.url): m.throughput_bps or 0 for m in ranking.mirrors}
        best = max(measured.values())

        def fraction(url: str) -> str:
            shape = farm.shape_of(url)
            if shape not in TRUE_RATE:
                return f"{shape}: not a usable mirror (0% of the best)"
            return f"{shape}: {measured.get(shape, 0) / best:.0%} of the best"

        print(f"mirrors: {len(farm.urls())} (fast, medium, 300 kB/s crawler, refused, stall, 404, stale, garbage)")
        print(f"ours:      {ours:6.2f} s  chose {fraction(ranking.chosen)}")
        print(f"curl -m 8: {theirs:6.2f} s  chose {fraction(theirs_choice)}")
        print(f"wall-time ratio curl/ours: {theirs / ours:.1f}x")
        for m in ranking.mirrors:
            print(f"  {farm.shape_of(m.url):8} {m.status:8} ttfb={m.ttfb_s} bps={m.throughput_bps} {m.detail}")
    finally:
        farm.close()


if __name__ == "__main__":
    main()
