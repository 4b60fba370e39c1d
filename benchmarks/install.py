"""Benchmark the install, for uv (the default) and for pip.

1. The floor (issue 43): on one loopback world shaped like a real mirror (a round trip of LATENCY before every
   page and every file's first byte, each connection capped at PER_CONNECTION, all of them on one LINE), whose
   wheels have the real closure's sizes (benchmarks/data/closure-9.1.0.json, taken by closure_sizes.py), print
   the install's wall time, the floor (the lock's bytes over the bandwidth `ascend-setup mirrors` measures
   on that mirror, plus the time to unpack the same wheels locally) and their ratio. Goal: uv within 1.2x.
   Then the same installer's commands typed by hand on the same mirror (see 2): the overhead where the bytes are
   real.
2. The overhead: the install against the same installer's commands typed by hand (unshaped loopback, stub
   sizes; each from its slice's index, as a person types it, where the install hands its installer the files it
   fetched itself), and the time from a rerun's start to its first new work after a SIGKILL. Goals: 1.10x, 1 s.

    .venv/bin/python benchmarks/install.py                 # both parts, --scale 0.25, 3 runs each
    .venv/bin/python benchmarks/install.py --only floor --scale 1 --runs 1

--scale S multiplies every file's real size by S; the number of files, the round trips and the shape stay. The
bytes' share of both the install and the floor scales with S, the install's fixed costs (interpreters, round
trips, the resolution, the checks) do not: a small S overstates the ratio, and --scale 1 is the closest to the
field (the world is then ~850 MB, and one pip install takes ~6 min on the default shape). The default, 0.25 with
3 runs, takes ~25 min for the floor part (with the by-hand replays) on a 2-core machine; `--runs 1` a third.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import _floor
from _common import clean_env, serve_stack

ORDER = ["venv", "cann-python-deps", "torch-stack", "vllm", "plugin-deps", "triton", "vllm-ascend"]


def install_argv(host, workdir: Path, installer: str, *extra: str) -> List[str]:
    return [
        sys.executable,
        "-m",
        "ascend_setup",
        "install",
        "--cann",
        "9.1.0",
        "--cann-home",
        str(host.cann.root),
        *host.index_args(),
        "--mirror",
        "none",
        "--yes",
        "--workdir",
        str(workdir),
        "--python",
        sys.executable,
        "--installer",
        installer,
        *extra,
    ]


def _plan_lock(host, lock: Path, env: Dict[str, str]) -> List[dict]:
    """The packages of the lock `plan` writes for this machine on the world's indexes."""
    plan = subprocess.run(
        [
            sys.executable,
            "-m",
            "ascend_setup",
            "plan",
            "--cann",
            "9.1.0",
            "--python",
            "%d.%d" % sys.version_info[:2],
            *host.index_args(),
            "--lock",
            str(lock),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if not lock.exists():
        raise SystemExit(f"plan failed: {plan.stderr[-2000:]}")
    return _floor.lock_files(lock)


def _steps(workdir: Path) -> str:
    """Each step's seconds, from the run's state."""
    state = json.loads((workdir / "state.json").read_text())
    return ", ".join(
        f"{name} {r['ended_at'] - r['started_at']:.1f}" for name, r in state["steps"].items() if r.get("ended_at")
    )


def _median(values: List[float]) -> float:
    return statistics.median(values)


def _spread(values: List[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values)


def floor(tmp: Path, scale: float, runs: int, installers: List[str]) -> None:
    """The install against its floor on the shaped world with the real closure's sizes."""
    _, host = serve_stack(tmp / "world")
    env = clean_env(tmp)
    indexes = [host.main, host.ascend, host.pytorch_cpu]
    directories = [host.eco.main, host.eco.ascend, host.eco.pytorch_cpu]
    started = time.perf_counter()
    closure = {p["name"] for p in _plan_lock(host, tmp / "stub.lock", env)}
    fitted = _floor.fit(directories, indexes, host.eco.main, scale, closure)
    _floor.shape_indexes(indexes)
    data = fitted.data
    print(
        f"world: the simulated 9.1.0 stack with the real closure's sizes x {scale:g} "
        f"({data['taken']}, {data['target']['arch']} / glibc {data['target']['glibc']} / Python "
        f"{data['target']['python']}: {len(data['packages'])} files, {data['bytes'] / 1e6:.0f} MB); "
        f"{len(fitted.padded)} stubs padded, {len(fitted.added)} packages added; built in "
        f"{time.perf_counter() - started:.0f} s"
    )
    for s in fitted.stand_ins:
        print(f"  stand-in: {s['name']} {s['version']} ({s['why']}): {s['size'] / 1e6:.1f} MB, {s['source']}")
    for s in fitted.left_out:
        print(f"  left out: {s['name']} {s['version']} ({s['why']}): {s['source']}")
    print(f"  not sized: {', '.join(fitted.kept_small)} (an sdist the install builds; the stub's own size)")

    # The lock the install will follow, from the shaped world itself: its bytes are the floor's bytes.
    packages = [p for p in _plan_lock(host, tmp / "floor.lock", env) if p.get("file")]
    wheels = [p for p in packages if p["file"].endswith(".whl")]
    lock_bytes = sum(p["size"] or 0 for p in packages)
    real_names = {p["name"] for p in data["packages"]} | {u["name"] for u in data["unreachable"]}
    covered = sum(1 for p in packages if p["name"] in real_names)
    absent = sorted(real_names - {p["name"] for p in packages})
    print(
        f"the lock: {len(packages)} files, {lock_bytes / 1e6:.1f} MB ({covered} of the real closure's "
        f"{len(real_names)} packages{'; not in it: ' + ', '.join(absent) if absent else ''}; "
        f"{len(packages) - covered} stub-only, at their stub size)"
    )

    # The mirror's bandwidth as the mirror step measures it (its parallel connections), median of `runs`.
    rates = []
    for i in range(runs):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "ascend_setup",
                "mirrors",
                "--cann",
                "9.1.0",
                "--only",
                "--json",
                "--candidate",
                host.main.url,
                "--python",
                sys.executable,
                "--workdir",
                str(tmp / f"mirrors-{i}"),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        ranking = json.loads(out.stdout)
        rates.append(ranking["mirrors"][0]["throughput_bps"] or 0.0)
    bandwidth = _median(rates)
    print(
        f"mirror: {_floor.LATENCY * 1e3:.0f} ms round trip, {_floor.PER_CONNECTION / 1e6:.1f} MB/s a connection, "
        f"{_floor.LINE / 1e6:.1f} MB/s line; `ascend-setup mirrors` measures {bandwidth / 1e6:.2f} MB/s "
        f"({', '.join(f'{r / 1e6:.2f}' for r in rates)})"
    )

    files = [_floor.find(directories, p["file"]) for p in wheels]
    unpacks = []
    for i in range(runs):
        into = tmp / f"unpack-{i}"
        unpacks.append(_floor.unpack_seconds([f for f in files if f is not None], into))
        shutil.rmtree(into)
    unpack = _median(unpacks)
    download = lock_bytes / bandwidth
    floor_s = download + unpack
    print(
        f"floor: {lock_bytes / 1e6:.1f} MB / {bandwidth / 1e6:.2f} MB/s = {download:.1f} s, + unpacking the "
        f"{len(files)} wheels locally {unpack:.1f} s ({_spread(unpacks)}) = {floor_s:.1f} s"
    )

    for installer in installers:
        walls: List[float] = []
        hands: List[float] = []
        steps: List[str] = []
        for i in range(runs):
            workdir = tmp / f"floor-{installer}-{i}"
            start = time.perf_counter()
            proc = subprocess.run(install_argv(host, workdir, installer), capture_output=True, text=True, env=env)
            walls.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"install --installer {installer} failed: {proc.stderr[-3000:]}")
            steps.append(_steps(workdir))
            hands.append(_replay_by_hand(workdir, tmp / f"by-hand-{installer}-{i}", host, env)[0])
            shutil.rmtree(workdir, ignore_errors=True)
            shutil.rmtree(tmp / f"by-hand-{installer}-{i}", ignore_errors=True)
        wall, hand = _median(walls), _median(hands)
        print(
            f"--installer {installer}: install {wall:.1f} s ({_spread(walls)}), floor {floor_s:.1f} s, "
            f"ratio {wall / floor_s:.2f}x (goal for uv: <= 1.2x)"
        )
        print(
            f"  the same commands typed by hand on this mirror: {hand:.1f} s ({_spread(hands)}); "
            f"ours/by-hand {wall / hand:.2f}x; by-hand/floor {hand / floor_s:.2f}x"
        )
        print(f"  steps (s) of the median run: {steps[walls.index(wall)] if wall in walls else steps[-1]}")
    host.close()


def overhead(tmp: Path, runs: int, installers: List[str]) -> None:
    """Each installer's overhead over its own commands typed by hand, and the first new work after a kill."""
    _, host = serve_stack(tmp / "stub-world")
    env = clean_env(tmp)
    for installer in installers:
        ours, hand, first = [], [], []
        for i in range(runs):
            o, h, f, resumed_at, commands = _overhead_once(tmp / f"{installer}-{i}", host, env, installer)
            ours.append(o)
            hand.append(h)
            first.append(f)
        print(
            f"--installer {installer}: commands the install ran: {commands} (the by-hand replay types them "
            "against each slice's index)"
        )
        print(f"  ascend-setup install (all steps, checks, state): {_median(ours):.1f} s ({_spread(ours)})")
        print(f"  the same commands typed by hand:                 {_median(hand):.1f} s ({_spread(hand)})")
        print(
            f"  overhead ratio ours/by-hand: {_median(ours) / _median(hand):.2f}x (goal <= 1.10x); "
            f"{_median(ours) - _median(hand):.1f} s more"
        )
        print(
            f"  rerun after a SIGKILL mid-install: first new work after {_median(first):.2f} s "
            f"({', '.join(f'{v:.2f}' for v in first)}; {resumed_at}) (goal <= 1 s)"
        )
    host.close()


def _typed_by_hand(command: str, host, cache: Path) -> List[str]:
    """A logged command as a person would type it: from the slice's index instead of the fetched files, and
    uv with a cache of the replay's own."""
    argv = command.split()
    if "--cache-dir" in argv:
        argv[argv.index("--cache-dir") + 1] = str(cache)
    if "--no-index" not in argv:
        return argv
    requirements = argv[argv.index("-r") + 1]
    index = (
        host.pytorch_cpu
        if requirements.endswith("-pytorch-cpu.txt")
        else host.ascend
        if requirements.endswith(".whl.requirements.txt")
        else host.main
    )
    at = argv.index("--no-index")
    links = argv.index("--find-links")
    assert links == at + 1, argv
    return [*argv[:at], "--index-url", index.url, *argv[links + 2 :]]


def _replay_by_hand(workdir: Path, by_hand: Path, host, env: Dict[str, str]) -> Tuple[float, int]:
    """(seconds, commands): every installer command the steps logged, replayed into a fresh venv with caches
    of its own, as a person types them. A person has no files fetched for them: where the install handed its
    installer the lock's files it fetched itself (--no-index --find-links), the replay names the slice's index,
    and the installer downloads them."""
    cache = by_hand / "uv-cache"
    commands = [
        _typed_by_hand(line[2:].replace(str(workdir), str(by_hand)), host, cache)
        for step in ORDER
        for line in (workdir / "logs" / f"{step}.log").read_text().splitlines()
        if line.startswith("$ ")
    ]
    by_hand.mkdir()
    shutil.copytree(workdir / "lock", by_hand / "lock")  # the hash-pinned files a person would write
    (by_hand / "downloads").mkdir()
    for written in (workdir / "downloads").glob("*.requirements.txt"):
        shutil.copy(written, by_hand / "downloads" / written.name)
    env = {**env, "HOME": str(by_hand / "home")}  # pip's own cache too
    start = time.perf_counter()
    for command in commands:
        subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - start, len(commands)


def _overhead_once(tmp: Path, host, env: Dict[str, str], installer: str):
    tmp.mkdir()
    workdir = tmp / "tool"
    start = time.perf_counter()
    proc = subprocess.run(install_argv(host, workdir, installer), capture_output=True, text=True, env=env)
    ours = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])

    hand, commands = _replay_by_hand(workdir, tmp / "by-hand", host, env)

    # A kill in the middle, then the time from the rerun's start to its first new work.
    killed = tmp / "killed"
    child = subprocess.Popen(
        install_argv(host, killed, installer),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while not (killed / "logs" / "plugin-deps.log").exists() and child.poll() is None:
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    start = time.perf_counter()
    rerun = subprocess.Popen(
        install_argv(host, killed, installer), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    first_new_work, resumed_at = float("nan"), "?"
    assert rerun.stderr is not None
    for line in rerun.stderr:
        if line.startswith("→") and first_new_work != first_new_work:
            first_new_work = time.perf_counter() - start
            resumed_at = line.split(":")[0]
    rerun.wait()
    shutil.rmtree(tmp, ignore_errors=True)
    return ours, hand, first_new_work, resumed_at, commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.25, help="the real sizes times this (default 0.25)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement; the median is printed")
    parser.add_argument("--only", choices=("floor", "overhead"))
    parser.add_argument("--installer", action="append", choices=("uv", "pip"), help="default: uv, then pip")
    args = parser.parse_args()
    installers = args.installer or ["uv", "pip"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-install-"))
    try:
        if args.only in (None, "floor"):
            floor(tmp / "floor", args.scale, args.runs, installers)
        if args.only in (None, "overhead"):
            overhead(tmp / "overhead", args.runs, installers)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
