"""Source builds that are known to fail or to take long on a target, for the forecast's warnings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class KnownBuild:
    name: str
    text: str
    glibc_below: Optional[Tuple[int, int]] = None  # only a problem on older C libraries

    def applies(self, glibc: Tuple[int, ...]) -> bool:
        return self.glibc_below is None or tuple(glibc) < self.glibc_below


KNOWN_BUILDS = (
    KnownBuild("z3-solver", "z3-solver's sdist does not compile on glibc < 2.34 (4.15.5-4.15.7 publish no Linux "
               "wheel, 4.15.8 aarch64 needs glibc 2.38): pin a release that has a manylinux wheel for the target",
               glibc_below=(2, 34)),
    KnownBuild("vllm-ascend", "vllm-ascend will be built from source: it needs the CANN toolkit (set_env.sh), "
               "torch at the row's version already in the venv, triton-ascend from the Ascend index and "
               "--no-build-isolation; {minutes} min cold, minutes when the build tree survives"),
    KnownBuild("arctic-inference", "arctic-inference publishes only an sdist: always a compile (gcc, g++, CMake)"),
    KnownBuild("tilelang", "tilelang's aarch64 wheels need glibc 2.34; the row strips it (vLLM guards every use)",
               glibc_below=(2, 34)),
)


def build_warnings(sdists: Sequence[str], glibc: Tuple[int, ...], build_minutes: int) -> List[str]:
    """Warnings for the packages the forecast says will be built from source."""
    names = {canonicalize_name(n) for n in sdists}
    return [k.text.format(minutes=build_minutes) for k in KNOWN_BUILDS if k.name in names and k.applies(glibc)]
