"""The audit's rules. Each reads the venv's dist-infos and returns findings with evidence and a fix.

They were checked against real venvs: compressed wheel tag sets and abi3 are ordinary tags; a package
the row calls CUDA-only that a kept package needs (xgrammar -> apache-tvm-ffi) is information, not an
error; a CUDA torch is recognised by what it requires and by its version.py, not by a `+cu` suffix.
"""

from __future__ import annotations

import os
import platform
import re
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from packaging.requirements import Requirement
from packaging.tags import Tag, parse_tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascend_setup.dists.installed import Installed, VenvContents, requirements_unmet
from ascend_setup.dists.markers import applicable
from ascend_setup.dists.versions import pin_verdict, same_version
from ascend_setup.host.machine import GLIBC_FLOOR, glibc_version
from ascend_setup.index.tags import Target, tag_priorities
from ascend_setup.matrix.models import MIRROR, Matrix, Row
from ascend_setup.matrix.soc import BUILD_INFO, build_info_device, device_of, label
from ascend_setup.resolve.lockfile import Lock
from ascend_setup.resolve.requirement_set import SUBSTITUTES, target_environment
from ascend_setup.utils.files import read_regular_text

#: Order of the fix plan, chosen so that every intermediate state still imports: the venv's shape
#: first (pip would see system packages as "already satisfied"), then the row's pins from their own
#: indexes (a CUDA torch becomes the row's build before the nvidia-* wheels it imports go), then the
#: removals, then the gaps, one-off fixes, and triton-ascend last (swapped in one step with triton).
PHASE_SHAPE, PHASE_PINS, PHASE_UNINSTALL, PHASE_FILL, PHASE_MANUAL, PHASE_TRITON = range(6)
_CUDA_VERSION = re.compile(r"^cuda\s*(?::\s*\S+\s*)?=\s*['\"]([^'\"]+)['\"]", re.M)


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

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        data.pop("phase")
        data.pop("fix_args")
        return data


class AuditContext:
    """What every rule needs: the venv, the row (for this machine's architecture), the indexes, markers."""

    def __init__(
        self,
        venv: VenvContents,
        row: Row,
        matrix: Matrix,
        lock: Optional[Lock] = None,
        mirror_url: Optional[str] = None,
        soc: Optional[str] = None,
        glibc: Optional[str] = None,
        environ: Optional[Mapping[str, str]] = None,
    ) -> None:
        """`glibc`: the target's C library where it is not this host's (`--glibc`); `environ`: the environment the
        venv's libraries will load in (its LD_LIBRARY_PATH; default this process's)."""
        self.venv = venv
        self.soc = soc  # this host's SOC_VERSION (--soc or npu-smi); None: no NPU known
        self.device = device_of(soc)
        self.row = row
        self.matrix = matrix
        self.lock = lock
        self.mirror_url = mirror_url
        self.installed = venv.by_name()
        self.python = f"{venv.root}/bin/python"
        self.pip = f"{self.python} -m pip"
        py = venv.python_version or "3.0.0"
        self.python_full = py
        self.python_minor = ".".join(py.split(".")[:2])
        self.glibc_target = glibc
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        glibc = glibc or glibc_version()
        self.target = Target(glibc=glibc or GLIBC_FLOOR, arch=platform.machine(), python=self.python_minor)
        self.glibc_known = glibc is not None
        self.env = target_environment(self.target)
        self.env["python_full_version"] = py
        self.cuda_torch = cuda_torch_evidence(self)

    def version_of(self, name: str) -> Optional[Version]:
        found = self.installed.get(canonicalize_name(name))
        return found[0].parsed_version if found else None

    def index_of(self, name: str) -> str:
        return self.row.index_of(name) if name in self.row.packages else MIRROR

    def index_url(self, index: str) -> Optional[str]:
        return self.mirror_url if index == MIRROR else self.matrix.index_url(index)

    def index_flag(self, name: Optional[str] = None) -> str:
        """`--index-url URL` of the index `name` really comes from (the mirror for None); '' for the mirror
        when the venv does not say which it is (pip's configuration then decides)."""
        url = self.index_url(self.index_of(name) if name else MIRROR)
        return f" --index-url {url}" if url else ""

    def requires(self, dist: Installed) -> List[Requirement]:
        """A distribution's requirements whose markers hold on this machine."""
        return applicable(dist.requires, self.env)


def cuda_torch_evidence(ctx: AuditContext) -> Optional[str]:
    """Why the installed torch is a CUDA build (nvidia-* requirements, version.py's cuda), or None."""
    torch = ctx.installed.get("torch")
    if not torch:
        return None
    nvidia = sorted(canonicalize_name(r.name) for r in ctx.requires(torch[0]) if r.name.lower().startswith("nvidia-"))
    reasons = [f"requires {', '.join(nvidia[:3])}{' ...' if len(nvidia) > 3 else ''}"] if nvidia else []
    version_py = next(
        (site / "torch" / "version.py" for site in ctx.venv.site if (site / "torch" / "version.py").is_file()), None
    )
    if version_py is not None:
        match = _CUDA_VERSION.search(version_py.read_text(errors="replace"))
        if match:
            reasons.append(f"torch/version.py says cuda = {match.group(1)}")
    local = (torch[0].parsed_version.local or "") if torch[0].parsed_version else ""
    if local.startswith("cu"):
        reasons.append(f"its version has +{local}")
    return "; ".join(reasons) or None


def _pin(
    ctx: AuditContext, name: str, pinned: str, fid: str, severity: str, message: str, evidence: Optional[str] = None
) -> Finding:
    fix = f"{ctx.pip} install --no-deps --force-reinstall{ctx.index_flag(name)} {name}=={pinned}"
    return Finding(
        fid, severity, name, message, fix, evidence=evidence, phase=PHASE_PINS, fix_args=(f"{name}=={pinned}",)
    )


def rule_row_pins(ctx: AuditContext) -> List[Finding]:
    """Every row package at exactly the row's version for this architecture, local part included."""
    findings = []
    vllm = ctx.installed.get("vllm")
    vllm_wants: Dict[str, Requirement] = {canonicalize_name(r.name): r for r in ctx.requires(vllm[0])} if vllm else {}
    for name, pinned in ctx.row.packages.items():
        if name == "triton-ascend":
            continue  # the triton rule owns it
        have = ctx.installed.get(name)
        if not have:
            findings.append(
                _pin(ctx, name, pinned, "pin-missing", "error", f"{name} is not installed; the row pins {pinned}")
            )
            continue
        installed = have[0].parsed_version
        if same_version(installed, pinned):
            continue
        verdict = pin_verdict(name, installed, pinned)
        if verdict.accepted:  # a newer post release or a source build of the pin: said, not fixed
            findings.append(
                Finding("pin-accepted", "info", name, verdict.note, evidence=str(have[0].path), phase=PHASE_PINS)
            )
            continue
        where = f" from the {ctx.index_of(name)} index" if ctx.index_of(name) != MIRROR else ""
        if installed is not None and installed.public == Version(pinned).public:
            if installed.local and installed.local.startswith("cu"):
                findings.append(
                    _pin(
                        ctx,
                        name,
                        pinned,
                        "cuda-build",
                        "error",
                        f"{name} {installed} is a CUDA build where the row says {pinned}{where}: "
                        "useless on Ascend, and it drags nvidia-* in",
                        str(have[0].path),
                    )
                )
            else:
                findings.append(
                    _pin(
                        ctx,
                        name,
                        pinned,
                        "pin-differs",
                        "error",
                        f"{name} {installed} is not the row's build {pinned}{where}",
                        str(have[0].path),
                    )
                )
            continue
        why = ""
        vreq = vllm_wants.get(name)
        if vreq is not None and installed is not None and vreq.specifier.contains(installed, prereleases=True):
            why = f": displaced, most likely by vllm's CUDA metadata ({vreq})"
        findings.append(
            _pin(
                ctx,
                name,
                pinned,
                "pin-differs",
                "error",
                f"{name} {have[0].version} where the row says {pinned}{where}{why}",
                str(have[0].path),
            )
        )
    return findings


def rule_cuda_torch(ctx: AuditContext) -> List[Finding]:
    """A CUDA torch in an Ascend venv, however its version string reads."""
    if not ctx.cuda_torch or "torch" not in ctx.row.packages:
        return []
    pinned = ctx.row.packages["torch"]
    return [
        _pin(
            ctx,
            "torch",
            pinned,
            "cuda-torch",
            "error",
            f"torch {ctx.installed['torch'][0].version} is a CUDA build ({ctx.cuda_torch}): 3 GB of nvidia-* "
            f"wheels and upstream triton on a machine without a GPU; the row's torch is {pinned}"
            + (f" from the {ctx.index_of('torch')} index" if ctx.index_of("torch") != MIRROR else ""),
            str(ctx.installed["torch"][0].path),
        )
    ]


def rule_row_requirements(ctx: AuditContext) -> List[Finding]:
    """The row packages' own requirements on each other (torch-npu's `torch==2.10.0+cpu`), local part included."""
    findings = []
    for unmet in requirements_unmet(ctx.venv, [n for n in ctx.row.packages if n != "vllm"], ctx.row.packages, ctx.env):
        dep, pinned = unmet.dependency, ctx.row.packages[unmet.dependency]
        findings.append(
            Finding(
                "row-requirement-unmet",
                "error",
                unmet.name,
                str(unmet),
                f"{ctx.pip} install --no-deps --force-reinstall{ctx.index_flag(dep)} {dep}=={pinned}",
                phase=PHASE_PINS,
                fix_args=(f"{dep}=={pinned}",),
            )
        )
    return findings


def rule_triton(ctx: AuditContext) -> List[Finding]:
    findings = []
    pinned = ctx.row.packages["triton-ascend"]
    upstream = ctx.installed.get("triton")
    ascend = ctx.installed.get("triton-ascend")
    remove = f"{ctx.pip} uninstall -y triton && " if upstream else ""
    reinstall = (
        f"{remove}{ctx.pip} install --force-reinstall --no-deps{ctx.index_flag('triton-ascend')} "
        f"triton-ascend=={pinned}"
    )
    crash = "the first inference dies with \"'function' object is not subscriptable\""
    if upstream:
        findings.append(
            Finding(
                "triton-upstream",
                "error",
                "triton",
                f"upstream triton {upstream[0].version} is installed: it shadows triton-ascend; {crash}",
                reinstall,
                evidence=str(upstream[0].path),
                phase=PHASE_TRITON,
            )
        )
    if not ascend:
        findings.append(
            Finding(
                "triton-ascend-missing",
                "error",
                "triton-ascend",
                f"triton-ascend is not installed; {crash}",
                reinstall,
                phase=PHASE_TRITON,
            )
        )
    elif not same_version(ascend[0].parsed_version, pinned):
        findings.append(
            Finding(
                "pin-differs",
                "error",
                "triton-ascend",
                f"triton-ascend {ascend[0].version} where the row says {pinned}",
                reinstall,
                evidence=str(ascend[0].path),
                phase=PHASE_TRITON,
            )
        )
    if upstream and ascend:
        mine = {p for p in ascend[0].record_paths() if p.startswith("triton/")}
        theirs = {p for p in upstream[0].record_paths() if p.startswith("triton/")}
        overlap = sorted(mine & theirs)
        if overlap:
            findings.append(
                Finding(
                    "triton-overlap",
                    "error",
                    "triton-ascend",
                    f"triton and triton-ascend both claim {len(overlap)} files under triton/ "
                    f"(e.g. {overlap[0]}): whichever was installed last won, and removing triton "
                    "deletes them: reinstall triton-ascend after",
                    reinstall,
                    phase=PHASE_TRITON,
                )
            )
    return findings


def _fill(ctx: AuditContext, spec: str) -> str:
    return f"{ctx.pip} install{ctx.index_flag()} '{spec}'"


def rule_cann_deps(ctx: AuditContext) -> List[Finding]:
    findings = []
    for name, minimum in ctx.row.cann_python_deps.items():
        have = ctx.version_of(name)
        spec = f"{name}>={minimum}" if minimum else name
        if have is None and name not in ctx.installed:
            findings.append(
                Finding(
                    "cann-dep-missing",
                    "error",
                    name,
                    f"{name} is missing; CANN's operator compiler imports it",
                    _fill(ctx, spec),
                    phase=PHASE_FILL,
                    fix_args=(spec,),
                )
            )
        elif minimum and have is not None and have < Version(minimum):
            findings.append(
                Finding(
                    "cann-dep-old",
                    "error",
                    name,
                    f"{name} {have} is below CANN's minimum {minimum}",
                    _fill(ctx, spec),
                    phase=PHASE_FILL,
                    fix_args=(spec,),
                )
            )
    return findings


def requirers(ctx: AuditContext, name: str, ignore: Set[str]) -> List[str]:
    """Installed packages (outside `ignore`) whose requirements name `name`."""
    return sorted(
        other
        for other, dists in ctx.installed.items()
        if other not in ignore and any(canonicalize_name(r.name) == name for r in ctx.requires(dists[0]))
    )


def chain_to(ctx: AuditContext, name: str, ignore: Set[str]) -> str:
    """One requirement chain that ends in `name`, from a package nothing else requires (or the row)."""
    queue = deque([[name]])
    seen = {name}
    while queue:
        path = queue.popleft()
        parents = [p for p in requirers(ctx, path[0], ignore) if p not in seen]
        if not parents or path[0] in ctx.row.packages:
            return " -> ".join(path)
        for parent in parents[:3]:
            seen.add(parent)
            queue.append([parent, *path])
    return name


def rule_cuda_only(ctx: AuditContext) -> List[Finding]:
    """CUDA-only packages: dead weight (removed after the pins), unless a kept package imports them."""
    findings = []
    cuda = {n for n in ctx.installed if n not in ctx.row.packages and n != "triton" and ctx.row.is_cuda_only(n)}
    # vllm's own requirements are waived on purpose; a CUDA torch is replaced before they go
    ignore = cuda | {"vllm"} | ({"torch"} if ctx.cuda_torch else set())
    for name in sorted(cuda):
        dist = ctx.installed[name][0]
        needed_by = requirers(ctx, name, ignore)
        if needed_by:
            findings.append(
                Finding(
                    "cuda-only-required",
                    "info",
                    name,
                    f"{name} {dist.version} is on the row's CUDA-only list, but "
                    f"{chain_to(ctx, name, ignore)} requires it: it stays",
                    evidence=str(dist.path),
                )
            )
            continue
        findings.append(
            Finding(
                "cuda-only",
                "warning",
                name,
                f"{name} {dist.version} is CUDA-only: dead weight on Ascend (the row strips it)",
                f"{ctx.pip} uninstall -y {name}",
                evidence=str(dist.path),
                phase=PHASE_UNINSTALL,
                fix_args=(name,),
            )
        )
    return findings


def rule_closure(ctx: AuditContext) -> List[Finding]:
    """Like `pip check`, except vllm's CUDA requirements that the row replaces or strips on purpose, and the
    row packages' requirements on each other (rule_row_requirements names their index)."""
    findings = []
    for name, dists in ctx.installed.items():
        for req in ctx.requires(dists[0]):
            dep = canonicalize_name(req.name)
            have = ctx.installed.get(dep)
            version = have[0].parsed_version if have else None
            if have and (version is None or req.specifier.contains(version, prereleases=True)):
                continue
            state = f"{dep} {have[0].version} is installed" if have else f"{dep} is missing"
            stand_in = SUBSTITUTES.get(dep)
            if stand_in and stand_in in ctx.installed:
                findings.append(
                    Finding(
                        "expected-unmet",
                        "info",
                        dep,
                        f"{name} requires {req} but {state}: "
                        f"expected, {stand_in} provides it (upstream {dep} would shadow it)",
                    )
                )
                continue
            if name == "vllm" and (ctx.row.is_cuda_only(dep) or dep in ctx.row.packages):
                findings.append(
                    Finding(
                        "expected-unmet",
                        "info",
                        dep,
                        f"vllm requires {req} but {state}: expected, the row "
                        f"{'pins' if dep in ctx.row.packages else 'strips'} it on purpose",
                    )
                )
                continue
            if dep in ctx.row.packages or (name == "torch" and ctx.cuda_torch):
                continue  # the pin rules say it, with the right index; a CUDA torch's nvidia-* go with it
            spec = f"{dep}{req.specifier}"
            findings.append(
                Finding(
                    "requirement-unmet",
                    "error",
                    dep,
                    f"{name} {dists[0].version} requires {req} but {state}",
                    _fill(ctx, spec),
                    phase=PHASE_FILL,
                    fix_args=(spec,),
                )
            )
    return findings


def rule_venv_shape(ctx: AuditContext) -> List[Finding]:
    findings = []
    if ctx.venv.system_site_packages:
        findings.append(
            Finding(
                "system-site-packages",
                "warning",
                None,
                "the venv includes system site-packages: stale torch builds from the image leak in",
                "sed -i "
                "'s/^include-system-site-packages = true/include-system-site-packages = false/' "
                f"{ctx.venv.root}/pyvenv.cfg",
                evidence=f"{ctx.venv.root}/pyvenv.cfg",
                phase=PHASE_SHAPE,
            )
        )
    if ctx.venv.python_version and not ctx.row.python_allows(ctx.python_full):
        findings.append(
            Finding(
                "python-range",
                "error",
                None,
                f"the venv's Python {ctx.python_full} is outside the row's {ctx.row.python}",
                f"ascend-setup install --cann {ctx.row.cann} --python /path/to/python3.11 --venv NEW_DIR",
            )
        )
    for name, dists in ctx.installed.items():
        if len(dists) > 1:
            paths = ", ".join(d.path.name for d in dists)
            findings.append(
                Finding(
                    "duplicate-dist",
                    "error",
                    name,
                    f"{len(dists)} dist-infos of {name} ({paths}): imports and pip disagree about what is installed",
                    f"{ctx.pip} install --force-reinstall --no-deps{ctx.index_flag(name)} {name}=={dists[0].version}",
                    evidence=paths,
                )
            )
    return findings


def rule_wheel_tags(ctx: AuditContext) -> List[Finding]:
    """Wheels built for another machine. Tag lines are parsed whole (compressed tag sets, abi3)."""
    if not ctx.glibc_known:
        return []
    supported = tag_priorities(ctx.target)
    findings = []
    for name, dists in ctx.installed.items():
        tags = dists[0].wheel_tags()
        parsed: Set[Tag] = set()
        for text in tags:
            try:
                parsed |= parse_tag(text)
            except ValueError:
                continue
        if parsed and not parsed & supported.keys():
            findings.append(
                Finding(
                    "wheel-platform",
                    "error",
                    name,
                    f"{name} {dists[0].version} was built for "
                    f"{tags[0]}, which this machine (glibc {ctx.target.glibc}, {ctx.target.arch}, "
                    f"Python {ctx.python_minor}) cannot run",
                    f"{ctx.pip} install --force-reinstall --no-deps{ctx.index_flag(name)} {name}=={dists[0].version}",
                    evidence=str(dists[0].path),
                )
            )
    return findings


def rule_provenance(ctx: AuditContext) -> List[Finding]:
    """Where the stack's packages came from: a local build or URL (direct_url.json), another installer."""
    findings = []
    for name in ctx.row.packages:
        for dist in ctx.installed.get(name, [])[:1]:
            direct = dist.direct_url()
            if direct:
                findings.append(
                    Finding(
                        "direct-url",
                        "info",
                        name,
                        f"{name} {dist.version} was installed from {direct.url}, not from an index",
                        evidence=str(dist.path),
                    )
                )
            installer = dist.installer()
            if installer and installer not in ("pip", "uv"):
                findings.append(
                    Finding(
                        "foreign-installer",
                        "warning",
                        name,
                        f"{name} was installed by {installer}: pip and uv cannot manage it safely",
                        f"{ctx.pip} install --force-reinstall --no-deps{ctx.index_flag(name)} {name}=={dist.version}",
                        evidence=f"{dist.path}/INSTALLER",
                    )
                )
    return findings


def rule_lock_drift(ctx: AuditContext) -> List[Finding]:
    """Drift against the lock the venv was installed from: missing, extra and different packages."""
    if ctx.lock is None:
        return []
    locked = {p.name: p for p in ctx.lock.packages if p.outcome != "unavailable"}
    findings = []
    for name, p in locked.items():
        have = ctx.installed.get(name)
        if name == "triton-ascend" or (have and same_version(have[0].parsed_version, p.version or "")):
            continue  # the triton rule swaps triton-ascend in, in one step with triton's removal
        fix = f"{ctx.pip} install --no-deps --force-reinstall{ctx.index_flag(name)} {name}=={p.version}"
        message = (
            f"{name} {have[0].version} where the lock says {p.version}"
            if have
            else f"{name}=={p.version} is in the lock but not installed"
        )
        findings.append(
            Finding(
                "lock-differs" if have else "lock-missing",
                "error",
                name,
                message,
                fix,
                evidence=str(have[0].path) if have else None,
                phase=PHASE_PINS,
                fix_args=(f"{name}=={p.version}",),
            )
        )
    for name, dists in ctx.installed.items():
        if name not in locked and name not in SUBSTITUTES:
            findings.append(
                Finding(
                    "lock-extra",
                    "warning",
                    name,
                    f"{name} {dists[0].version} is installed but not in the lock",
                    f"{ctx.pip} uninstall -y {name}",
                    evidence=str(dists[0].path),
                    phase=PHASE_UNINSTALL,
                    fix_args=(name,),
                )
            )
    return findings


def installed_device(venv: VenvContents) -> Optional[Tuple[str, Path]]:
    """The device type the installed vllm_ascend was built for, as its worker reads it at start-up, and the
    `_build_info.py` that says so; None when no vllm_ascend (or no build info) is installed."""
    for site in venv.site:
        path = site / BUILD_INFO
        if path.is_file():
            return build_info_device(read_regular_text(path)), path
    return None


def rule_device_type(ctx: AuditContext) -> List[Finding]:
    """A vllm_ascend built for another device type than this host's NPUs: it imports, and the first
    `vllm serve` dies in check_ascend_device_type (the published wheels are A2 only)."""
    found = installed_device(ctx.venv) if ctx.device and ctx.installed.get("vllm-ascend") else None
    if found is None or found[0] == ctx.device:
        return []
    built, path = found
    version = ctx.installed["vllm-ascend"][0].version
    return [
        Finding(
            "device-type",
            "error",
            "vllm-ascend",
            f"vllm-ascend {version} was built for {label(built)} NPUs and this host's are {label(ctx.device)} "
            f"(SOC {ctx.soc}): vLLM's worker refuses to start (check_ascend_device_type)",
            f"ascend-setup install --cann {ctx.row.cann} --venv {ctx.venv.root} --soc {ctx.soc} (builds "
            f"vllm-ascend {version} from source for {label(ctx.device)})",
            evidence=f"{path}: __device_type__ = {built!r}",
        )
    ]


def rule_damaged_files(ctx: AuditContext) -> List[Finding]:
    """`audit --deep` only: every distribution's files against its RECORD (see distcheck for the cost)."""
    from ascend_setup.dists.record import check_dist

    found = []
    for name, dists in sorted(ctx.installed.items()):
        for dist in dists:
            damage = check_dist(name, dist.path)
            if damage is not None:
                found.append(
                    Finding(
                        "damaged-files",
                        "error",
                        name,
                        f"{damage.summary()}: an interrupted install left it half-written",
                        evidence=str(dist.path),
                        phase=PHASE_PINS,
                        fix_args=(f"{name}=={dist.version}",),
                    )
                )
    return found


def rule_damaged_metadata(ctx: AuditContext) -> List[Finding]:
    """A dist-info file that is not readable text: whatever it describes cannot be trusted."""
    return [
        Finding(
            "damaged-metadata",
            "error",
            path.parent.name.split("-")[0],
            why,
            f"reinstall that distribution into {ctx.venv.root} (its files were damaged)",
            evidence=str(path),
        )
        for path, why in ctx.venv.damaged
    ]


RULES = (
    rule_damaged_metadata,
    rule_row_pins,
    rule_cuda_torch,
    rule_row_requirements,
    rule_triton,
    rule_cann_deps,
    rule_cuda_only,
    rule_closure,
    rule_venv_shape,
    rule_wheel_tags,
    rule_provenance,
    rule_lock_drift,
    rule_device_type,
)
