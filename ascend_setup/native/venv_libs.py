"""Every shared object of a venv (each `.so` its distributions' RECORDs list), checked against a target.

A RECORD entry is taken as the installer wrote it, relative to its site-packages: one that leads out of the venv,
by `..` or through a symbolic link, is a problem of its own and is not read (the file is not the venv's). Each
file is checked once, however many entries name it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from ascend_setup.dists.installed import VenvContents
from ascend_setup.host.machine import glibc_version
from ascend_setup.native.elf import ElfNeeds
from ascend_setup.native.ldcache import conf_dirs, read_cache
from ascend_setup.native.loader import Problem, Resolver, Target, library_path


@dataclass
class NativeProblem:
    """A problem, with the distribution whose RECORD lists the library."""

    distribution: str
    version: str
    problem: Problem


@dataclass
class NativeReport:
    problems: List[NativeProblem]
    checked: int  # shared objects read
    target: Target


def host_target(env: Mapping[str, str], glibc: Optional[str] = None) -> Target:
    """This host as the target, with the LD_LIBRARY_PATH of `env` (what the check runs the libraries with);
    `glibc` holds its C library to another release's (`--glibc 2.31`)."""
    cache = read_cache()
    mine = glibc_version()
    label = "this host" if glibc is None or glibc == mine else f"the target (--glibc {glibc})"
    return Target(
        glibc=glibc or mine,
        library_path=library_path(env),
        cache=cache,
        system_dirs=() if cache else tuple(conf_dirs()),
        label=label,
    )


def is_shared_object_name(name: str) -> bool:
    """`x.so` and versioned `libx.so.1.2`, as wheels ship them (torch's `libgomp-a34b3233.so.1`)."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def shared_objects(venv: VenvContents) -> Tuple[List[Tuple[str, str, Path]], List[NativeProblem]]:
    """((distribution, version, path) of each shared object inside the venv, once; the entries that lead out)."""
    root = Path(os.path.realpath(venv.root))
    found: Dict[Path, Tuple[str, str, Path]] = {}
    outside: List[NativeProblem] = []
    for dist in venv.dists:
        site = dist.path.parent
        for entry in dist.record_paths():
            if not is_shared_object_name(entry):
                continue
            path = Path(os.path.normpath(site / entry))
            real = Path(os.path.realpath(path))
            if not (real == root or root in real.parents):
                outside.append(
                    NativeProblem(
                        dist.name,
                        dist.version,
                        Problem(
                            "outside",
                            path,
                            path.name,
                            f"it leads out of the venv, to {real}: not read",
                            f"{path}: a link out of the venv ({real})",
                        ),
                    )
                )
                continue
            if real.exists() and real not in found:
                found[real] = (dist.name, dist.version, path)
    return list(found.values()), outside


def interpreter_of(venv: VenvContents) -> Optional[Path]:
    """The venv's Python as the loader's main program (its symbols serve every extension module)."""
    for name in ("python", "python3"):
        candidate = venv.root / "bin" / name
        if candidate.exists():
            return Path(os.path.realpath(candidate))
    return None


def check_venv(venv: VenvContents, target: Target) -> NativeReport:
    """Every shared object of the venv, loaded on `target`: the problems, by distribution."""
    files, problems = shared_objects(venv)
    sonames: Dict[str, Path] = {}
    resolver = Resolver(target=target, venv_root=venv.root, venv_sonames=sonames, interpreter=interpreter_of(venv))
    for _dist, _version, path in files:
        needs = resolver.read(path)
        if isinstance(needs, ElfNeeds):
            sonames.setdefault(needs.soname or path.name, path)
    loops = set()
    for dist, version, path in files:
        for problem in resolver.check(path):
            if problem.kind == "loop":
                members = frozenset(problem.needs.split(" -> "))
                if members in loops:
                    continue  # the same loop, seen from another of its members
                loops.add(members)
            problems.append(NativeProblem(dist, version, problem))
    return NativeReport(problems=problems, checked=len(files), target=target)
