"""Benchmark: an offline install from a bundle (`install --bundle`, inside `unshare -n`) against the online
install of the same lock from the loopback indexes, each in a fresh workdir with empty caches. The target is a
ratio of at most 1.0x: the bundle replaces the downloads, nothing else.

    python benchmarks/bundle.py [--repeat N]     (root: unshare -n)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import clean_env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    repeat = parser.parse_args().repeat
    from ascend_setup.host.machine import glibc_version
    from ascend_setup.matrix import load_matrix
    from ascend_setup.simulate.world import start_simulated_host

    tmp = Path(tempfile.mkdtemp(prefix="bench-bundle-"))
    # vllm-ascend as a wheel this machine takes: the benchmark times the installs, not the stub's source build
    host = start_simulated_host(
        tmp / "host",
        load_matrix().rows["9.1.0"],
        plugin_wheel_arches=("x86_64", "aarch64"),
        plugin_wheel_glibc=glibc_version() or "2.17",
        tool_dependencies=True,
    )
    cli = [sys.executable, "-m", "ascend_setup"]
    python = "%d.%d" % sys.version_info[:2]

    def env(name: str) -> dict:
        home = tmp / "homes" / name
        if home.exists():
            shutil.rmtree(home)
        home.mkdir(parents=True)
        return clean_env(home)

    lock = tmp / "lock.txt"
    proc = subprocess.run(
        [*cli, "plan", "--cann", "9.1.0", "--python", python, *host.index_args(), "--lock", str(lock)],
        capture_output=True,
        text=True,
        env=env("plan"),
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    bundle = tmp / "bundle"
    start = time.perf_counter()
    proc = subprocess.run(
        [
            *cli,
            "bundle",
            "--cann",
            "9.1.0",
            "--python",
            python,
            *host.index_args(),
            "--tool-index-url",
            host.tools.url,
            "--lock",
            str(lock),
            "-o",
            str(bundle),
        ],
        capture_output=True,
        text=True,
        env=env("bundle"),
    )
    made = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])

    def install(name: str, *how: str, offline: bool = False) -> float:
        workdir = tmp / name
        argv = [
            *cli,
            "install",
            "--cann",
            "9.1.0",
            "--cann-home",
            str(host.cann.root),
            "--workdir",
            str(workdir),
            "--python",
            sys.executable,
            "--yes",
            *how,
        ]
        start = time.perf_counter()
        proc = subprocess.run(
            ["unshare", "-n", *argv] if offline else argv, capture_output=True, text=True, env=env(name)
        )
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{name}: {proc.stderr[-3000:]}")
        shutil.rmtree(workdir)
        return seconds

    online, offline = [], []
    for i in range(repeat):  # alternated, so a load change on the machine hits both alike
        online.append(install(f"online-{i}", "--lock", str(lock), *host.index_args(), "--mirror", "none"))
        offline.append(install(f"offline-{i}", "--bundle", str(bundle), offline=True))
    on, off = statistics.median(online), statistics.median(offline)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    print(
        f"lock: {sum(1 for l in lock.read_text().splitlines() if '==' in l)} packages; bundle {size / 1e6:.1f} MB, "
        f"made in {made:.1f} s"
    )
    print(f"online install from the loopback indexes (median of {repeat}): {on:.1f} s  {[round(s, 1) for s in online]}")
    print(
        f"offline install --bundle in unshare -n (median of {repeat}):   {off:.1f} s  {[round(s, 1) for s in offline]}"
    )
    print(f"offline / online: {off / on:.2f}x (target <= 1.0x)")
    host.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
