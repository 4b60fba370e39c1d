"""Benchmark: audit's native check against `ldd` on each file, on the demo's venv and on a venv of 180
distributions that hold this machine's own shared libraries (hard links or copies of /lib's, ~4 a distribution,
up to 720 files: real sizes, real symbol tables, real NEEDED chains). Prints times, counts and ratios.

    python benchmarks/native.py [DEMO_VENV]

Without DEMO_VENV the demo is run first (`ascend-setup demo --workdir TMP`, ~40 s) and its venv used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import venv as venv_module
from pathlib import Path
from typing import List

from _common import clean_env, run, timed
from helpers.fake_dists import fake_install

from ascend_setup.dists.installed import read_venv
from ascend_setup.native.venv_libs import check_venv, host_target, shared_objects

DISTRIBUTIONS = 180
PER_DIST = 4
SYSTEM = next(
    (Path(d) for d in ("/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib64") if Path(d).is_dir()),
    Path("/usr/lib"),
)


def system_libraries() -> List[Path]:
    """Regular ELF files of the system's library directory (links taken once, by their target)."""
    seen, found = set(), []
    for path in sorted(SYSTEM.glob("*.so*")):
        real = Path(os.path.realpath(path))
        if real in seen or not real.is_file():
            continue
        with open(real, "rb") as handle:
            if handle.read(4) != b"\x7fELF":
                continue
        seen.add(real)
        found.append(real)
    return found


def big_venv(root: Path) -> Path:
    venv_module.create(root, with_pip=False)
    libraries = system_libraries()
    for i in range(DISTRIBUTIONS):
        chosen = libraries[i * PER_DIST : (i + 1) * PER_DIST]
        info = fake_install(root, f"native-{i}", "1.0", files={f"native_{i}/__init__.py": ""})
        site = info.parent
        for lib in chosen:
            target = site / f"native_{i}" / lib.name
            try:
                os.link(lib, target)
            except OSError:
                shutil.copyfile(lib, target)
        with open(info / "RECORD", "a") as record:
            record.writelines(f"native_{i}/{lib.name},,\n" for lib in chosen)
    return root


def demo_venv(tmp: Path) -> Path:
    workdir = tmp / "demo"
    done = run(
        [sys.executable, "-m", "ascend_setup", "demo", "--workdir", str(workdir), "--installer", "uv"], clean_env(tmp)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return workdir / "install" / "venv"


def ldd_each(files: List[Path]) -> None:
    for path in files:
        subprocess.run(["ldd", str(path)], capture_output=True, timeout=60)


def measure(label: str, venv: Path) -> None:
    contents = read_venv(venv)
    files = [path for _, _, path in shared_objects(contents)[0]]
    target = host_target(os.environ)
    ours, report = timed(lambda: check_venv(read_venv(venv), target), repeat=3)
    cli, proc = timed(
        lambda: run(
            [sys.executable, "-m", "ascend_setup", "audit", "--venv", str(venv), "--json"], clean_env(venv.parent)
        ),
        repeat=3,
    )
    assert proc.returncode in (0, 1), proc.stderr
    ldd, _ = timed(lambda: ldd_each(files), repeat=1)
    size = sum(p.stat().st_size for p in files)
    kinds: dict = {}
    for item in report.problems:
        kinds[item.problem.kind] = kinds.get(item.problem.kind, 0) + 1
    print(f"{label}: {len(contents.dists)} distributions, {len(files)} shared objects, {size / 1e6:.0f} MB")
    print(
        f"  native check (read + resolve + versions + symbols): {ours:.3f} s "
        f"({1000 * ours / max(len(files), 1):.2f} ms a file); problems {kinds or 'none'}"
    )
    print(f"  whole 'audit --json' (every rule, the CLI's start-up): {cli:.3f} s")
    print(f"  ldd on each file:                                    {ldd:.3f} s  ({ldd / ours:.1f}x the native check)")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-native-"))
    try:
        demo = Path(sys.argv[1]) if len(sys.argv) > 1 else demo_venv(tmp)
        measure("the demo's venv", demo)
        measure(f"{DISTRIBUTIONS} distributions of this machine's libraries", big_venv(tmp / "big"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
