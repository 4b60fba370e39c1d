"""Benchmark: `ascend-setup audit` vs `pip check` vs `pipdeptree --warn fail` on one venv of 300+
distributions (the 9.1.0 stack plus fillers, fabricated dist-infos). Prints times and ratios.

    python benchmarks/audit.py
"""

from __future__ import annotations

import sys
import tempfile
import venv as venv_module
from pathlib import Path

from _common import REPO, clean_env, run, timed
from helpers.fake_dists import fake_install

from ascend_setup.matrix import load_matrix
from ascend_setup.simulate.ecosystem import PLUGIN_REQUIRES, VLLM_REQUIRES, stub_versions

FILLERS = 220


def build_venv(root: Path) -> Path:
    row = load_matrix().rows["9.1.0"]
    venv_module.create(root, with_pip=True)
    special = {"vllm": VLLM_REQUIRES, "vllm-ascend": PLUGIN_REQUIRES}
    for name, version in sorted(stub_versions(dict(row.packages), dict(row.cann_python_deps)).items()):
        if name in ("pip", "setuptools") or (row.is_cuda_only(name) and name not in row.packages):
            continue
        fake_install(root, name, version, requires=special.get(name, ()))
    for i in range(FILLERS):
        requires = [f"filler-{i + 1}>=1.0"] if (i + 1) % 10 else []  # chains of ten
        fake_install(root, f"filler-{i}", "1.0", requires=requires + ["numpy>=1.0"])
    return root


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    venv = build_venv(tmp / "venv")
    count = len(list(next((venv / "lib").glob("python3*/site-packages")).glob("*.dist-info")))
    env = clean_env(tmp)
    # An installed tool has its bytecode compiled (pip does it at install); so does ours here.
    run([sys.executable, "-m", "compileall", "-q", str(REPO / "ascend_setup")], env)
    ours, proc = timed(
        lambda: run([sys.executable, "-m", "ascend_setup", "audit", "--venv", str(venv), "--json"], env), repeat=5
    )
    assert proc.returncode in (0, 1), proc.stderr
    pip_check, _ = timed(lambda: run([str(venv / "bin" / "python"), "-m", "pip", "check"], env), repeat=5)
    deptree, _ = timed(
        lambda: run(
            [sys.executable, "-m", "pipdeptree", "--python", str(venv / "bin" / "python"), "--warn", "fail"], env
        ),
        repeat=5,
    )
    print(f"distributions in the venv: {count}")
    print(f"ascend-setup audit --json (whole CLI, all rules): {ours:.3f} s")
    print(f"pip check:                                       {pip_check:.3f} s  ({pip_check / ours:.2f}x ours)")
    print(f"pipdeptree --warn fail:                          {deptree:.3f} s  ({deptree / ours:.2f}x ours)")
    print(f"ours / pipdeptree: {ours / deptree:.2f}x (goal <= 2x: {'met' if ours <= 2 * deptree else 'MISSED'})")
    print(f"budget 0.5 s: {'met' if ours <= 0.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
