"""Benchmark: the full-closure `ascend-setup plan` against `uv pip compile` alone (the very request plan
sends it) and against `pip install --dry-run --report` over the same roots, on the same loopback
indexes. Prints the wall times, the ratios, and how many versions agree with pip's.

    .venv/bin/python benchmarks/plan.py           # the loopback stub world
    .venv/bin/python benchmarks/plan.py --live    # plan vs uv alone on pip's configured (real) index

Targets: plan <= 1.3x uv alone; plan >= 5x faster than pip.
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from statistics import median

from _common import clean_env, run, serve_stack, timed
from packaging.utils import canonicalize_name

from ascend_setup.dists.installers import uv_command
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.tags import Target
from ascend_setup.matrix import select_row
from ascend_setup.resolve.closure import IndexSources, prepare_closure
from ascend_setup.resolve.pythons import build_interpreter
from ascend_setup.resolve.uvcompile import compile_argv


def live(runs: int = 5) -> None:
    """Plan and uv alone for glibc 2.31 / aarch64 / 3.11 on pip's configured index (warm caches for both), run
    in turns (plan, uv, plan, uv, ...) so that a slow minute of the index weighs on both alike."""
    from ascend_setup.index.pipconfig import pip_settings
    from ascend_setup.matrix import load_matrix

    tmp = Path(tempfile.mkdtemp(prefix="bench-plan-live-"))
    env = clean_env(tmp)
    index = pip_settings().index
    plan_argv = [
        sys.executable,
        "-m",
        "ascend_setup",
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        "2.31",
        "--arch",
        "aarch64",
        "--python",
        "3.11",
        "--index-url",
        index,
        "--json",
    ]
    matrix = load_matrix()
    row = select_row(matrix, "9.1.0", "aarch64")
    prepared = prepare_closure(
        row,
        Target("2.31", "aarch64", "3.11"),
        IndexSources.for_row(matrix, row, index),
        build_python=build_interpreter("3.11"),
    )
    proc = run(plan_argv, env)  # warms both caches: neither timed run pays a cold one
    _uv_alone(prepared, tmp, env)
    ours, alone = [], []
    for _ in range(runs):
        ours.append(timed(lambda: run(plan_argv, env), repeat=1)[0])
        alone.append(timed(lambda: _uv_alone(prepared, tmp, env), repeat=1)[0])
    print(f"real index ({index}): closure {json.loads(proc.stdout)['summary']}")
    print(
        f"plan: {median(ours):.2f} s ({', '.join(f'{t:.2f}' for t in ours)})   uv pip compile alone (same "
        f"request): {median(alone):.2f} s ({', '.join(f'{t:.2f}' for t in alone)})"
    )
    print(
        f"ratio of the medians {median(ours) / median(alone):.2f}x (target <= 1.3x); each turn's: "
        f"{', '.join(f'{o / a:.2f}' for o, a in zip(ours, alone))}"
    )
    # pip is not timed here: it evaluates markers for the machine it runs on (torch's CUDA requirements
    # come back for an aarch64 target), which is why plan resolves with uv.


def _uv_alone(prepared, tmp: Path, env):
    """`uv pip compile` on the very request plan sends it (same roots, overrides, excludes, pinned indexes,
    build interpreter), with its own warm cache."""
    workdir = tmp / "closure"
    workdir.mkdir(exist_ok=True)
    done = run(
        [*uv_command(), *compile_argv(prepared.request, workdir, tmp / "uv-cache")],
        {**env, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(f"uv failed: {done.stderr[-2000:]}")
    return done


def main() -> None:
    if "--live" in sys.argv:
        return live()
    tmp = Path(tempfile.mkdtemp(prefix="bench-plan-"))
    matrix, host = serve_stack(tmp)
    main_index, eco = host.main, host.eco
    env = clean_env(tmp)
    arch, glibc, python = platform.machine(), glibc_version() or "2.17", "%d.%d" % sys.version_info[:2]
    plan_argv = [
        sys.executable,
        "-m",
        "ascend_setup",
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        glibc,
        "--arch",
        arch,
        "--python",
        python,
        *host.index_args(),
        "--json",
    ]
    ours, proc = timed(lambda: run(plan_argv, env))
    if proc.returncode != 0:
        raise SystemExit(f"plan failed: {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)

    # uv alone, on the exact request plan builds
    row = select_row(matrix, "9.1.0", arch)
    prepared = prepare_closure(
        row,
        Target(glibc, arch, python),
        IndexSources.for_row(matrix, row, main_index.url),
        build_python=build_interpreter(python),
    )
    uv_alone, _ = timed(lambda: _uv_alone(prepared, tmp, env))

    # pip over the same roots; one flat index holding the same files (pip cannot pin packages to indexes)
    flat = tmp / "flat"
    shutil.copytree(eco.main, flat)
    for path in [*eco.ascend.iterdir(), *(p for p in eco.pytorch_cpu.iterdir() if "+cpu" in p.name)]:
        shutil.copy(path, flat / path.name)
    from ascend_setup.simulate.index_server import LocalIndex

    flat_index = LocalIndex()
    flat_index.add_dir(flat)
    roots = tmp / "roots.txt"
    roots.write_text("\n".join(prepared.request.roots) + "\n")
    pip_argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--report",
        "-",
        "--ignore-installed",
        "-q",
        "--index-url",
        flat_index.url,
        "-r",
        str(roots),
    ]
    theirs, pip_proc = timed(lambda: run(pip_argv, env))
    if pip_proc.returncode != 0:
        raise SystemExit(f"pip failed: {pip_proc.stderr[-2000:]}")
    print(f"target: glibc {glibc} / {arch} / Python {python}; closure: {data['summary']}")
    print(f"plan (gate, metadata, derive, uv, file choice, sizes, backends): {ours:.2f} s")
    print(f"uv pip compile alone (the same request):                         {uv_alone:.2f} s")
    print(f"pip install --dry-run --report (the same roots, flat index):     {theirs:.2f} s")
    print(f"plan / uv alone: {ours / uv_alone:.2f}x (target <= 1.3x);  pip / plan: {theirs / ours:.2f}x (target >= 5x)")
    started, _ = timed(lambda: run([sys.executable, "-c", "import ascend_setup.commands.plan"], env))
    print(
        f"plan - uv alone: {ours - uv_alone:.2f} s, of which {started:.2f} s is starting Python and importing the "
        "command (requests, pydantic, PyYAML, packaging) before anything is asked"
    )
    chosen = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
        for i in json.loads(pip_proc.stdout)["install"]
    }
    compared = [p for p in data["packages"] if p["name"] in chosen]
    agree = sum(1 for p in compared if chosen[p["name"]] == p["version"])
    print(
        f"versions agreeing with pip: {agree}/{len(compared)} (pip also resolved: "
        f"{', '.join(sorted(set(chosen) - {p['name'] for p in data['packages']})) or 'nothing else'})"
    )
    host.close()
    flat_index.close()


if __name__ == "__main__":
    main()
