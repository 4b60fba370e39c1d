"""The audit's rules. Each reads the venv's dist-infos and returns findings with evidence and a fix."""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascend_setup.audit.venv import VenvContents
from ascend_setup.deps.derive import target_environment
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.tags import Target, tag_priorities
from ascend_setup.matrix.models import MIRROR, Matrix, Row

#: Requirements another installed distribution stands in for: triton-ascend ships the `triton`
#: package, and upstream triton (which xgrammar asks for on x86) must stay out.
SUBSTITUTES = {"triton": "triton-ascend"}

#: Order of the fix plan: remove what is wrong, put the pins back, fill gaps, triton-ascend last.
PHASE_UNINSTALL, PHASE_PINS, PHASE_FILL, PHASE_TRITON, PHASE_MANUAL = range(5)


@dataclass
class Finding:
    id: str
    severity: str  # error | warning | info
    package: Optional[str]
    message: str
    fix: Optional[str] = None
    evidence: Optional[str] = None
    phase: int = PHASE_MANUAL
    fix_args: Tuple[str, ...] = ()  # what this finding adds to its phase's combined command

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("phase")
        data.pop("fix_args")
        return data


class AuditContext:
    """What every rule needs: the venv, the row, the pip command, the marker environment."""

    def __init__(self, venv: VenvContents, row: Row, matrix: Matrix) -> None:
        self.venv = venv
        self.row = row
        self.matrix = matrix
        self.installed = venv.by_name()
        self.pip = f"{venv.root}/bin/python -m pip"
        py = venv.python_version or "3.0.0"
        self.python_full = py
        self.python_minor = ".".join(py.split(".")[:2])
        glibc = glibc_version()
        self.target = Target(glibc=glibc or "2.17", arch=platform.machine(), python=self.python_minor)
        self.glibc_known = glibc is not None
        self.env = target_environment(self.target)
        self.env["python_full_version"] = py

    def version_of(self, name: str) -> Optional[Version]:
        found = self.installed.get(canonicalize_name(name))
        return found[0].parsed_version if found else None

    def ascend_index(self) -> str:
        name = self.row.index_of("triton-ascend")
        return self.matrix.index_url(name) if name != MIRROR else ""


def _vllm_pins(ctx: AuditContext) -> Dict[str, Requirement]:
    vllm = ctx.installed.get("vllm")
    result: Dict[str, Requirement] = {}
    for text in vllm[0].requires if vllm else []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        result[canonicalize_name(req.name)] = req
    return result


def rule_row_pins(ctx: AuditContext) -> List[Finding]:
    findings = []
    vllm_wants = _vllm_pins(ctx)
    for name, pinned in ctx.row.packages.items():
        have = ctx.installed.get(name)
        want = Version(pinned)
        if name == "triton-ascend":
            continue  # the triton rule owns it
        if not have:
            findings.append(Finding("pin-missing", "error", name, f"{name} is not installed; the row pins {pinned}",
                                    f"{ctx.pip} install --no-deps {name}=={pinned}", phase=PHASE_PINS,
                                    fix_args=(f"{name}=={pinned}",)))
            continue
        installed = have[0].parsed_version
        if installed is not None and installed.public == want.public and not installed.local:
            continue
        if installed is not None and installed.public == want.public:
            if installed.local and "cu" in installed.local:
                findings.append(Finding("cuda-build", "warning", name,
                                        f"{name} {installed} is a CUDA build: useless on Ascend and it drags nvidia-* in",
                                        f"{ctx.pip} install --no-deps --force-reinstall {name}=={pinned}",
                                        evidence=str(have[0].path), phase=PHASE_PINS, fix_args=(f"{name}=={pinned}",)))
            continue
        why = ""
        vreq = vllm_wants.get(name)
        if vreq is not None and installed is not None and vreq.specifier.contains(installed, prereleases=True):
            why = f": displaced, most likely by vllm's CUDA metadata ({vreq})"
        findings.append(Finding("pin-differs", "error", name, f"{name} {have[0].version} where the row says {pinned}{why}",
                                f"{ctx.pip} install --no-deps {name}=={pinned}", evidence=str(have[0].path),
                                phase=PHASE_PINS, fix_args=(f"{name}=={pinned}",)))
    return findings


def rule_triton(ctx: AuditContext) -> List[Finding]:
    findings = []
    pinned = ctx.row.packages["triton-ascend"]
    index = ctx.ascend_index()
    reinstall = f"{ctx.pip} install --force-reinstall --no-deps triton-ascend=={pinned}" + \
        (f" --extra-index-url {index}" if index else "")
    upstream = ctx.installed.get("triton")
    ascend = ctx.installed.get("triton-ascend")
    crash = "the first inference dies with \"'function' object is not subscriptable\""
    if upstream:
        findings.append(Finding("triton-upstream", "error", "triton",
                                f"upstream triton {upstream[0].version} is installed: it shadows triton-ascend; {crash}",
                                f"{ctx.pip} uninstall -y triton", evidence=str(upstream[0].path),
                                phase=PHASE_UNINSTALL, fix_args=("triton",)))
    if not ascend:
        findings.append(Finding("triton-ascend-missing", "error", "triton-ascend",
                                f"triton-ascend is not installed; {crash}", reinstall, phase=PHASE_TRITON))
    elif ascend[0].parsed_version != Version(pinned):
        findings.append(Finding("pin-differs", "error", "triton-ascend",
                                f"triton-ascend {ascend[0].version} where the row says {pinned}", reinstall,
                                evidence=str(ascend[0].path), phase=PHASE_TRITON))
    if upstream and ascend:
        mine = {p for p in ascend[0].record_paths() if p.startswith("triton/")}
        theirs = {p for p in upstream[0].record_paths() if p.startswith("triton/")}
        overlap = sorted(mine & theirs)
        if overlap:
            findings.append(Finding("triton-overlap", "error", "triton-ascend",
                                    f"triton and triton-ascend both claim {len(overlap)} files under triton/ "
                                    f"(e.g. {overlap[0]}): whichever was installed last won, and removing triton "
                                    "deletes them: reinstall triton-ascend after", reinstall, phase=PHASE_TRITON))
    return findings


def rule_cann_deps(ctx: AuditContext) -> List[Finding]:
    findings = []
    for name, minimum in ctx.row.cann_python_deps.items():
        have = ctx.version_of(name)
        spec = f"{name}>={minimum}" if minimum else name
        if have is None and name not in ctx.installed:
            findings.append(Finding("cann-dep-missing", "error", name,
                                    f"{name} is missing; CANN's operator compiler imports it", f"{ctx.pip} install '{spec}'",
                                    phase=PHASE_FILL, fix_args=(spec,)))
        elif minimum and have is not None and have < Version(minimum):
            findings.append(Finding("cann-dep-old", "error", name, f"{name} {have} is below CANN's minimum {minimum}",
                                    f"{ctx.pip} install '{spec}'", phase=PHASE_FILL, fix_args=(spec,)))
    return findings


def rule_cuda_only(ctx: AuditContext) -> List[Finding]:
    findings = []
    for name, dists in ctx.installed.items():
        if name in ctx.row.packages or name == "triton" or not ctx.row.is_cuda_only(name):
            continue
        findings.append(Finding("cuda-only", "warning", name,
                                f"{name} {dists[0].version} is CUDA-only: dead weight on Ascend (the row strips it)",
                                f"{ctx.pip} uninstall -y {name}", evidence=str(dists[0].path),
                                phase=PHASE_UNINSTALL, fix_args=(name,)))
    return findings


def rule_closure(ctx: AuditContext) -> List[Finding]:
    """Like `pip check`, except vllm's CUDA requirements that the row replaces or strips on purpose."""
    findings = []
    for name, dists in ctx.installed.items():
        for text in dists[0].requires:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate(dict(ctx.env)):
                continue
            dep = canonicalize_name(req.name)
            have = ctx.installed.get(dep)
            version = have[0].parsed_version if have else None
            if have and (version is None or req.specifier.contains(version, prereleases=True)):
                continue
            state = f"{dep} {have[0].version} is installed" if have else f"{dep} is missing"
            stand_in = SUBSTITUTES.get(dep)
            if stand_in and stand_in in ctx.installed:
                findings.append(Finding("expected-unmet", "info", dep, f"{name} requires {req} but {state}: "
                                        f"expected, {stand_in} provides it (upstream {dep} would shadow it)"))
                continue
            if name == "vllm" and (ctx.row.is_cuda_only(dep) or dep in ctx.row.packages):
                findings.append(Finding("expected-unmet", "info", dep,
                                        f"vllm requires {req} but {state}: expected, the row "
                                        f"{'pins' if dep in ctx.row.packages else 'strips'} it on purpose"))
                continue
            spec = f"{dep}{req.specifier}"
            findings.append(Finding("requirement-unmet", "error", dep, f"{name} {dists[0].version} requires {req} "
                                    f"but {state}", f"{ctx.pip} install '{spec}'", phase=PHASE_FILL, fix_args=(spec,)))
    return findings


def rule_venv_shape(ctx: AuditContext) -> List[Finding]:
    findings = []
    if ctx.venv.system_site_packages:
        findings.append(Finding("system-site-packages", "warning", None,
                                "the venv includes system site-packages: stale torch builds from the image leak in",
                                f"sed -i 's/^include-system-site-packages = true/include-system-site-packages = false/' "
                                f"{ctx.venv.root}/pyvenv.cfg", evidence=f"{ctx.venv.root}/pyvenv.cfg"))
    if ctx.venv.python_version and not ctx.row.python_allows(ctx.python_full):
        findings.append(Finding("python-range", "error", None, f"the venv's Python {ctx.python_full} is outside "
                                f"the row's {ctx.row.python}", f"ascend-setup install --cann {ctx.row.cann} "
                                "--python /path/to/python3.11 --venv NEW_DIR"))
    for name, dists in ctx.installed.items():
        if len(dists) > 1:
            paths = ", ".join(d.path.name for d in dists)
            findings.append(Finding("duplicate-dist", "error", name, f"{len(dists)} dist-infos of {name} ({paths}): "
                                    "imports and pip disagree about what is installed",
                                    f"{ctx.pip} install --force-reinstall --no-deps {name}=={dists[0].version}",
                                    evidence=paths))
    return findings


def rule_wheel_tags(ctx: AuditContext) -> List[Finding]:
    if not ctx.glibc_known:
        return []
    supported = tag_priorities(ctx.target)
    findings = []
    for name, dists in ctx.installed.items():
        tags = dists[0].wheel_tags()
        if not tags:
            continue
        parsed = [Tag(*t.split("-", 2)) for t in tags if t.count("-") == 2]
        if parsed and not any(t in supported for t in parsed):
            findings.append(Finding("wheel-platform", "error", name, f"{name} {dists[0].version} was built for "
                                    f"{tags[0]}, which this machine (glibc {ctx.target.glibc}, {ctx.target.arch}, "
                                    f"Python {ctx.python_minor}) cannot run",
                                    f"{ctx.pip} install --force-reinstall --no-deps {name}=={dists[0].version}",
                                    evidence=str(dists[0].path)))
    return findings


def rule_provenance(ctx: AuditContext) -> List[Finding]:
    """Where the stack's packages came from: a local build or URL (direct_url.json), another installer."""
    findings = []
    for name in ctx.row.packages:
        for dist in ctx.installed.get(name, [])[:1]:
            direct = dist.direct_url()
            if direct and direct.get("url"):
                findings.append(Finding("direct-url", "info", name, f"{name} {dist.version} was installed from "
                                        f"{direct['url']}, not from an index", evidence=str(dist.path)))
            installer = dist.installer()
            if installer and installer not in ("pip", "uv"):
                findings.append(Finding("foreign-installer", "warning", name,
                                        f"{name} was installed by {installer}: pip and uv cannot manage it safely",
                                        f"{ctx.pip} install --force-reinstall --no-deps {name}=={dist.version}",
                                        evidence=f"{dist.path}/INSTALLER"))
    return findings


RULES = (rule_row_pins, rule_triton, rule_cann_deps, rule_cuda_only, rule_closure, rule_venv_shape, rule_wheel_tags, rule_provenance)
