"""The tool's own dependencies on an index of their own, for `bundle --tool-index-url`: what the real index
serves them as. For this machine they are real wheels, repacked from the distributions this interpreter has
installed (so a bundle's bootstrap.sh really installs and runs the tool with no index); for the other
architecture and the other Pythons of the bundle's range, stubs with the same names, versions and
requirements (so the bundle's choice of each platform's wheel, uv's among them, is exercised). One version of
each project is served, for every Python 3.9-3.13: the repacked METADATA leaves out Requires-Python."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascend_setup.bundle.repack import repack
from ascend_setup.bundle.tool import DIST, TOOL_PYTHONS, tool_requirements
from ascend_setup.simulate.dists import build_wheel

ARCHES = ("x86_64", "aarch64")


def _env(python: str) -> Dict[str, str]:
    return {"python_version": python, "python_full_version": python + ".0", "extra": ""}


def _needed(requirements: Iterable[str], pythons: Iterable[str]) -> List[Requirement]:
    reqs = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate(_env(p)) for p in pythons):
            reqs.append(req)
    return reqs


def closure() -> Tuple[Dict[str, metadata.Distribution], Dict[str, Requirement]]:
    """(installed distributions of the tool's requirements, recursively; requirements of them not installed)."""
    found: Dict[str, metadata.Distribution] = {}
    absent: Dict[str, Requirement] = {}
    queue = _needed(tool_requirements(), TOOL_PYTHONS)
    while queue:
        req = queue.pop()
        name = canonicalize_name(req.name)
        if name in found or name in absent or name == DIST:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            absent[name] = req
            continue
        found[name] = dist
        queue += _needed(dist.requires or [], TOOL_PYTHONS)
    return found, absent


def _other_platforms(tag: str) -> List[str]:
    """The tags of the same wheel for the other architecture and, for a CPython-specific one, the other Pythons."""
    py, abi, plat = tag.split("-")
    if plat == "any":
        return []
    arch = next(a for a in ARCHES if a in plat)
    tags = set()
    for other in ARCHES:
        if abi in ("none", "abi3"):
            tags.add(f"{py}-{abi}-manylinux_2_17_{other}" if other != arch else "")
        else:
            for python in TOOL_PYTHONS:
                cp = "cp" + python.replace(".", "")
                if other != arch or cp not in py.split("."):
                    tags.add(f"{cp}-{cp}-manylinux_2_17_{other}")
    return sorted(t for t in tags if t)


def build_tool_index(out: Path) -> List[Path]:
    """Every wheel the tool's dependencies need, for both architectures and Pythons 3.9-3.13, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    found, absent = closure()
    made = []
    for dist in found.values():
        wheel = repack(dist, out, keep_requires_python=False)
        made.append(wheel)
        requires = list(dist.requires or [])
        for tag in _other_platforms(wheel.name[:-4].split("-", 2)[2]):
            made.append(build_wheel(out, dist.metadata["Name"], dist.version, tag=tag, requires=requires))
    for name, req in absent.items():
        version = next(
            (
                str(v)
                for v in (Version("1.0"), Version("3.0"), Version("100.0"))
                if req.specifier.contains(v, prereleases=True)
            ),
            "1.0",
        )
        made.append(build_wheel(out, name, version))
    return made
