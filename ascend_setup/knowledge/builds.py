"""Source builds that are known to fail or to take long on a target, for the forecast's warnings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class KnownBuild:
    name: str
    text: str
    glibc_below: Optional[Tuple[int, int]] = None  # only a problem on older C libraries

    def applies(self, glibc: Tuple[int, ...]) -> bool:
        return self.glibc_below is None or tuple(glibc) < self.glibc_below


KNOWN_BUILDS = (
    KnownBuild(
        "z3-solver",
        "z3-solver's sdist does not compile on glibc < 2.34 (4.15.5-4.15.7 publish no Linux "
        "wheel, 4.15.8 aarch64 needs glibc 2.38): pin a release that has a manylinux wheel for the target",
        glibc_below=(2, 34),
    ),
    KnownBuild(
        "vllm-ascend",
        "vllm-ascend will be built from source: it needs the CANN toolkit (set_env.sh), "
        "torch at the row's version already in the venv, triton-ascend from the Ascend index and "
        "--no-build-isolation; {minutes} min cold, minutes when the build tree survives",
    ),
    KnownBuild("arctic-inference", "arctic-inference publishes only an sdist: always a compile (gcc, g++, CMake)"),
    KnownBuild(
        "tilelang",
        "tilelang's aarch64 wheels need glibc 2.34; the row strips it (vLLM guards every use)",
        glibc_below=(2, 34),
    ),
)


def build_warnings(sdists: Sequence[str], glibc: Tuple[int, ...], build_minutes: int) -> List[Tuple[str, str]]:
    """(package, warning) for the packages the forecast says will be built from source."""
    names = {canonicalize_name(n) for n in sdists}
    return [
        (k.name, k.text.format(minutes=build_minutes)) for k in KNOWN_BUILDS if k.name in names and k.applies(glibc)
    ]


#: Build backends (or build requirements) and the toolchain a host needs to run them.
_TOOLCHAINS = (
    (("maturin", "setuptools-rust", "setuptools_rust"), "Rust (cargo and rustc) and a C compiler"),
    (("scikit-build-core", "scikit_build_core", "scikit-build", "skbuild", "cmake"), "CMake and a C/C++ compiler"),
    (("mesonpy", "meson-python", "meson"), "Meson, Ninja and a C/C++ compiler"),
    (("hatchling", "flit_core", "flit-core", "poetry.core", "poetry-core", "pdm.backend", "pdm-backend"), ""),
    (("setuptools",), "a C/C++ compiler and the Python headers if it has extension modules"),
)


def _requirement_name(text: str) -> str:
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return text.strip().lower()


def toolchain_for(backend: str, requires: Sequence[str] = ()) -> str:
    """What building an sdist with `backend` (and these build requirements) asks of the host; '' for a
    pure-Python or unknown (in-tree) backend."""
    words = [backend.split(":")[0].lower()] + [_requirement_name(r) for r in requires]
    for names, toolchain in _TOOLCHAINS:
        if any(w == n or w.startswith(n + ".") for w in words for n in names):
            return toolchain
    return ""
