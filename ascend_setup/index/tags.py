"""The wheel tags a target accepts (glibc X.Y, architecture, CPython version), like pip computes them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Tuple

from packaging.tags import Tag, compatible_tags, cpython_tags

from ascend_setup.errors import BadInput

ARCHES = ("x86_64", "aarch64", "i686", "ppc64le", "s390x", "armv7l")

#: Legacy manylinux names and the glibc they stand for (PEP 600's aliases).
_LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
_LEGACY_ARCHES = {"manylinux2014": ARCHES, "manylinux2010": ("x86_64", "i686"), "manylinux1": ("x86_64", "i686")}


@dataclass(frozen=True)
class Target:
    """A machine that need not be this one."""

    glibc: str
    arch: str
    python: str

    @classmethod
    def parse(cls, glibc: str, arch: str, python: str) -> Target:
        """Each error names the value only; the caller adds the flag it came from (BadInput.given_as)."""
        return cls(glibc=parse_glibc(glibc), arch=parse_arch(arch), python=parse_python(python))

    @property
    def python_tuple(self) -> Tuple[int, ...]:
        return tuple(int(p) for p in self.python.split("."))

    @property
    def python_full(self) -> str:
        """What pip compares requires-python with for --python-version X.Y."""
        return f"{self.python}.0"

    @property
    def glibc_tuple(self) -> Tuple[int, ...]:
        return tuple(int(p) for p in self.glibc.split("."))

    def to_json(self) -> Dict[str, str]:
        return {"glibc": self.glibc, "arch": self.arch, "python": self.python}

    def describe(self) -> str:
        return f"glibc {self.glibc} / {self.arch} / Python {self.python}"

    def key(self) -> str:
        """A file-name-safe name of the target, e.g. 'aarch64-glibc2.31-py3.11'."""
        return f"{self.arch}-glibc{self.glibc}-py{self.python}"


def parse_glibc(value: str) -> str:
    if not re.fullmatch(r"2\.\d{1,3}", value or ""):
        raise BadInput(f"{value!r} is not a glibc version such as 2.31")
    return value


def parse_arch(value: str) -> str:
    if value not in ARCHES:
        raise BadInput(f"{value!r} is not one of {', '.join(ARCHES)}")
    return value


def parse_python(value: str) -> str:
    """X.Y of a CPython 3 version given as X.Y or X.Y.Z."""
    match = re.fullmatch(r"(3)\.(\d{1,2})(?:\.\d+)?", value or "")
    if not match:
        raise BadInput(f"{value!r} is not a CPython 3 version such as 3.11")
    return f"{match.group(1)}.{match.group(2)}"


def platforms(target: Target) -> List[str]:
    """manylinux_2_Z_<arch> for Z from the target's glibc down, legacy aliases beside their Z, then
    `linux_<arch>` last. PyPI refuses linux_* uploads, but pip installs one from any index that serves
    it (checked against real pip), so the forecast must count it too, and flag it."""
    major, minor = target.glibc_tuple
    oldest = 5 if target.arch in ("x86_64", "i686") else 17  # as packaging.tags does
    result: List[str] = []
    for z in range(minor, oldest - 1, -1):
        result.append(f"manylinux_{major}_{z}_{target.arch}")
        legacy = _LEGACY.get((major, z))
        if legacy and target.arch in _LEGACY_ARCHES[legacy]:
            result.append(f"{legacy}_{target.arch}")
    result.append(f"linux_{target.arch}")
    return result


def supported_tags(target: Target) -> List[Tag]:
    """Most preferred first: cpXY, abi3 down to cp32, then py3/none, as packaging orders them."""
    plats = platforms(target)
    version = target.python_tuple
    tags = list(cpython_tags(python_version=version, platforms=plats))
    tags += list(compatible_tags(python_version=version, interpreter=f"cp{version[0]}{version[1]}", platforms=plats))
    seen = set()
    unique = []
    for tag in tags:
        if tag not in seen:
            seen.add(tag)
            unique.append(tag)
    return unique


@lru_cache(maxsize=64)
def tag_priorities(target: Target) -> Dict[Tag, int]:
    """Tag -> rank (0 is best), for choosing among a version's wheels the way pip does (computed once per
    target: a closure asks it for every one of its ~180 packages)."""
    return {tag: i for i, tag in enumerate(supported_tags(target))}


def manylinux_glibc(platform_tag: str) -> Tuple[int, ...]:
    """(2, 34) for 'manylinux_2_34_aarch64', legacy aliases mapped; () for anything else."""
    match = re.match(r"manylinux_(\d+)_(\d+)_", platform_tag)
    if match:
        return int(match.group(1)), int(match.group(2))
    for glibc, name in _LEGACY.items():
        if platform_tag.startswith(name + "_"):
            return glibc
    return ()


def platform_arch(platform_tag: str) -> str:
    """The architecture a platform tag is for ('any' for pure wheels)."""
    if platform_tag == "any":
        return "any"
    for arch in ARCHES:
        if platform_tag.endswith("_" + arch):
            return arch
    return platform_tag
