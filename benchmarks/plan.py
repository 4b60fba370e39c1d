"""Benchmark: `ascend-setup plan` vs `pip install --dry-run --report - --only-binary=:all: --no-deps`
over the same package list on the same loopback index. Prints both wall times and the ratio.

    python benchmarks/plan.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from _common import clean_env, run, serve_stack, timed

from ascend_setup.deps.derive import specifier_for  # noqa: E402


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-plan-"))
    row, main_index, ascend_index = serve_stack(tmp)
    env = clean_env(tmp)
    plan_argv = [sys.executable, "-m", "ascend_setup", "plan", "--cann", "9.1.0", "--glibc", "2.35", "--arch",
                 "x86_64", "--python", "3.11", "--index-url", main_index.url, "--extra-index-url",
                 ascend_index.url, "--json"]
    ours, proc = timed(lambda: run(plan_argv, env))
    data = json.loads(proc.stdout)
    wheels = [p for p in data["packages"] if p["outcome"] == "wheel"]
    requirements = [f"{p['name']}{specifier_for(row, p['name'])}" for p in wheels]
    # pip gets the same names with the row's pins and the CANN minimums; it resolves nothing else
    # (no deps), so it does strictly less work than plan, which also derives the requirement set.
    pip_argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--report", "-", "--only-binary=:all:",
                "--no-deps", "--ignore-installed", "--target", str(tmp / "target"), "--python-version", "3.11",
                "--index-url", main_index.url, "--extra-index-url", ascend_index.url, "-q", *requirements]
    theirs, pip_proc = timed(lambda: run(pip_argv, env))
    if pip_proc.returncode != 0:
        raise SystemExit(f"pip failed: {pip_proc.stderr[-2000:]}")
    chosen = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
              for i in json.loads(pip_proc.stdout)["install"]}
    agree = sum(1 for p in wheels if chosen.get(p["name"]) == p["version"])
    print(f"packages forecast by plan: {len(data['packages'])} ({len(wheels)} wheels)")
    print(f"plan (derives the set, all indexes, concurrent): {ours:.2f} s")
    print(f"pip install --dry-run --report (same wheel list): {theirs:.2f} s")
    print(f"ratio pip/plan: {theirs / ours:.2f}x   versions agreeing with pip: {agree}/{len(wheels)}")
    main_index.close()
    ascend_index.close()


if __name__ == "__main__":
    main()
