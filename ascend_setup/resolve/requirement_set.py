"""The requirement set the install takes next to vllm (installed --no-deps), derived from vllm's and the
plugin's metadata: vllm's minus CUDA-only, the plugin's pins winning. (The matrix's own derivation of a
row for a new CANN is matrix/derive.py.)

Deriving the list from vllm alone is the mistake that crashes the first inference: vllm's CUDA pins
displace the torch that torch_npu needs. So: vllm's requirements minus the row's CUDA-only patterns,
the plugin's specifier winning where it pins a version (intersected where it only bounds one), and
the row's pins above all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, cast

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name

from ascend_setup.dists.markers import applicable
from ascend_setup.index.tags import Target
from ascend_setup.matrix.models import Row

#: Requirements another package of the row stands in for: triton-ascend installs the `triton` package itself,
#: and upstream triton (which torch's CUDA build and xgrammar on x86 ask for) would shadow it. The resolution
#: excludes them; audit expects them unmet.
SUBSTITUTES = {"triton": "triton-ascend"}

#: Row packages that other steps install; the plugin-deps step must not touch them.
INSTALLED_ELSEWHERE = {
    "torch": "torch-stack",
    "torch-npu": "torch-stack",
    "torchvision": "torch-stack",
    "torchaudio": "torch-stack",
    "triton-ascend": "triton",
    "vllm": "vllm",
    "vllm-ascend": "vllm-ascend",
}


@dataclass
class Derived:
    """One requirement and the reason it is in or out."""

    name: str
    specifier: SpecifierSet
    extras: List[str] = field(default_factory=list)
    included: bool = True
    why: str = ""
    sources: List[str] = field(default_factory=list)

    def requirement(self) -> str:
        extras = f"[{','.join(sorted(self.extras))}]" if self.extras else ""
        return f"{self.name}{extras}{self.specifier}"


def target_environment(target: Target) -> Dict[str, str]:
    """Marker environment of a Linux CPython target that need not be this machine."""
    env = cast(Dict[str, str], dict(default_environment()))  # packaging's Environment: a TypedDict of str
    env.update(
        {
            "python_version": target.python,
            "python_full_version": target.python_full,
            "platform_machine": target.arch,
            "sys_platform": "linux",
            "platform_system": "Linux",
            "os_name": "posix",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "extra": "",
        }
    )
    return env


def _is_pin(spec: SpecifierSet) -> bool:
    return any(s.operator in ("==", "===") and "*" not in s.version for s in spec)


def derive(
    row: Row, vllm_requires: Iterable[str], plugin_requires: Iterable[str], env: Mapping[str, str]
) -> List[Derived]:
    """The requirement set with a reason per entry, in a stable order (vllm's order, then the plugin's)."""
    out: Dict[NormalizedName, Derived] = {}
    plugin = {canonicalize_name(r.name): r for r in applicable(plugin_requires, env)}
    for text in row.plugin_requirements:
        r = Requirement(text)
        plugin.setdefault(canonicalize_name(r.name), r)
    for req in applicable(vllm_requires, env):
        name = canonicalize_name(req.name)
        if name in out:
            out[name].specifier &= req.specifier
            continue
        entry = Derived(name, req.specifier, sorted(req.extras), sources=[f"vllm: {req}"])
        if row.is_cuda_only(name) and name not in plugin and name not in row.packages:
            entry.included, entry.why = False, "CUDA-only: stripped by the row"
        out[name] = entry
    for name, req in plugin.items():
        known = out.get(name)
        if known is None:
            out[name] = Derived(
                name, req.specifier, sorted(req.extras), why="required by the plugin", sources=[f"vllm-ascend: {req}"]
            )
            continue
        known.sources.append(f"vllm-ascend: {req}")
        known.extras = sorted(set(known.extras) | set(req.extras))
        if _is_pin(req.specifier):
            known.specifier, known.why = req.specifier, "the plugin's pin wins over vllm's"
        else:
            known.specifier &= req.specifier
            known.why = "vllm's and the plugin's bounds combined"
        known.included = True
    for name, entry in out.items():
        if name in row.packages:
            entry.specifier = SpecifierSet(f"=={row.packages[name]}")
            entry.why = "the row's pin"
        if name in INSTALLED_ELSEWHERE:
            entry.included = False
            entry.why = f"installed by the {INSTALLED_ELSEWHERE[name]} step at the row's version"
        elif entry.included and not entry.why:
            entry.why = "required by vllm"
    return list(out.values())


def cann_requirements(row: Row) -> List[str]:
    return [f"{name}>={minimum}" if minimum else name for name, minimum in row.cann_python_deps.items()]
