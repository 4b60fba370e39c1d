"""Take the real closure's file sizes for the floor benchmark (benchmarks/install.py) and write them to
benchmarks/data/closure-9.1.0.json: the lock `ascend-setup plan --cann 9.1.0 --lock FILE` writes against pip's
configured index, reduced to name, version, file and size (no URL, no host).

    .venv/bin/python benchmarks/closure_sizes.py [--glibc 2.35] [--arch aarch64] [--python 3.11]

The target is an Atlas A2 host (aarch64) whose glibc takes vllm-ascend's published wheel (manylinux_2_34): the
install the floor is about downloads and unpacks wheels, it builds nothing. A package whose index cannot be
reached from where this runs is recorded under "unreachable" with what stands in for it, so the data says
plainly which sizes were not read.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO, clean_env
from packaging.specifiers import SpecifierSet

from ascend_setup import __version__
from ascend_setup.index.choose import choose
from ascend_setup.index.pipconfig import pip_settings
from ascend_setup.index.simple import SimpleIndex
from ascend_setup.index.tags import Target

OUT = REPO / "benchmarks" / "data" / "closure-9.1.0.json"
#: What stands in for a package whose own index is unreachable from here: the nearest release of the same
#: package that pip's configured index serves for the same target (read live, its size recorded as such).
STAND_IN_VERSIONS = {"triton-ascend": "3.2.0"}


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def _stand_in(name: str, target: Target, index: str) -> dict:
    """The size of the stand-in release of `name` on pip's configured index, for `target`."""
    version = STAND_IN_VERSIONS.get(name)
    if version is None:
        return {"size": None, "source": "none: left out of the benchmark"}
    page = SimpleIndex(index).project(name)
    chosen = choose(name, [page], SpecifierSet(f"=={version}"), target)
    if chosen.file is None or not chosen.file.size:
        return {"size": None, "source": f"none: {name} {version} has no file for this target either; left out"}
    return {
        "size": chosen.file.size,
        "file": chosen.file.filename,
        "source": f"the size of {name} {version}'s wheel for the same target on pip's configured index "
        f"(the pinned release's own index was unreachable; {version} is the newest release the "
        "configured index serves)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glibc", default="2.35")
    parser.add_argument("--arch", default="aarch64")
    parser.add_argument("--python", default="3.11")
    args = parser.parse_args()
    index = pip_settings().index
    target = Target(args.glibc, args.arch, args.python)
    with tempfile.TemporaryDirectory(prefix="closure-sizes-") as tmp:
        lock = Path(tmp) / "lock.txt"
        argv = [
            sys.executable,
            "-m",
            "ascend_setup",
            "plan",
            "--cann",
            "9.1.0",
            "--glibc",
            args.glibc,
            "--arch",
            args.arch,
            "--python",
            args.python,
            "--index-url",
            index,
            "--lock",
            str(lock),
            "--json",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, env=clean_env(Path(tmp)))
        if not lock.exists():
            raise SystemExit(f"plan wrote no lock (exit {done.returncode}): {done.stderr[-2000:]}")
        plan = json.loads(done.stdout)
    packages, unreachable = [], []
    for p in plan["packages"]:
        if p["outcome"] in ("wheel", "sdist") and p["size"]:
            packages.append(
                {"name": p["name"], "version": p["version"], "kind": p["outcome"], "file": p["file"], "size": p["size"]}
            )
        else:
            unreachable.append(
                {
                    "name": p["name"],
                    "version": p["version"],
                    "index": p["index"],
                    "why": "its index could not be reached from where the sizes were taken"
                    if "could not be reached" in (p["reason"] or "")
                    else p["reason"],
                    **_stand_in(p["name"], target, index),
                }
            )
    data = {
        "what": "the real closure of the 9.1.0 row: every file the install downloads, with its size",
        "taken": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "how": (
            f"benchmarks/closure_sizes.py: ascend-setup {__version__} (commit {_commit()}) plan --cann 9.1.0 "
            f"--glibc {args.glibc} --arch {args.arch} --python {args.python} --index-url <pip's configured "
            "index> --lock FILE; sizes as that index's PEP 691 pages give them"
        ),
        "target": {"glibc": args.glibc, "arch": args.arch, "python": args.python},
        "summary": plan["summary"],
        "bytes": sum(p["size"] for p in packages),
        "packages": packages,
        "unreachable": unreachable,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(
        f"{OUT.relative_to(REPO)}: {len(packages)} files, {data['bytes'] / 1e6:.1f} MB; unreachable: "
        f"{', '.join(u['name'] + ' (' + u['source'] + ')' for u in unreachable) or 'none'}"
    )


if __name__ == "__main__":
    main()
