"""Resolve a row's whole closure for one target into a Lock. `plan` shows it, `install` installs it:
the forecast is what gets installed, by construction.

The steps: the reachability gate (every index the row needs answers and serves its pins), vllm's and
vllm-ascend's requirements read from the index, the derived set (CUDA-only stripped, the plugin's pins
winning), one uv resolution for the target, then the one file per package pip would take from the
index the row assigns it to, with its size, hash, requirement chain and, for an sdist, build backend.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.specifiers import SpecifierSet

from ascend_setup.index.choose import Choice, choose, from_source
from ascend_setup.index.filecache import FileTextCache
from ascend_setup.index.http import IndexUnreachable
from ascend_setup.index.metadata import BuildSystem, MetadataReader, build_system, content_length
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.reach import GATE_SECONDS, IndexCheck, IndexNeed, check_indexes
from ascend_setup.index.simple import IndexFile, IndexSet, ProjectPage, SimpleIndex
from ascend_setup.index.tags import Target
from ascend_setup.knowledge.builds import build_warnings, toolchain_for
from ascend_setup.matrix.models import MIRROR, Matrix, Row
from ascend_setup.matrix.soc import label
from ascend_setup.resolve.lockfile import Lock, LockedPackage, LockTarget, LockWarning
from ascend_setup.resolve.requirement_set import SUBSTITUTES, Derived, cann_requirements, derive, target_environment
from ascend_setup.resolve.uvcompile import ROOT_PROJECT, ClosureRequest, Resolved, compile_closure
from ascend_setup.utils.paths import files_cache

#: Installed alone with --no-deps: vllm's own requirements would displace the row's torch, and the
#: plugin's are part of the derived set. Their requirements enter the resolution through `derive`.
NO_DEPS = ("vllm", "vllm-ascend")


@dataclass(frozen=True)
class IndexSources:
    """Where packages come from: the mirror (plus the user's extra indexes) and the row's named indexes."""

    mirror: str
    extra: Tuple[str, ...] = ()
    named: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def for_row(cls, matrix: Matrix, row: Row, mirror: str, extra: Sequence[str] = ()) -> IndexSources:
        return cls(mirror, tuple(extra), {n: matrix.index_url(n) for n in row.named_indexes()})

    def urls_for(self, index: str) -> List[str]:
        return [self.mirror, *self.extra] if index == MIRROR else [self.named[index]]

    def as_dict(self) -> Dict[str, str]:
        return {MIRROR: self.mirror, **self.named}


def inputs_digest(row: Row, target: Target, sources: IndexSources, device: Optional[str] = None) -> str:
    """What a lock depends on; a lock whose digest differs is stale and is resolved again (the device type
    counts: vllm-ascend's wheel is for A2 only)."""
    payload = {
        "row": row.to_json(),
        "target": target.to_json(),
        "indexes": sources.as_dict(),
        "extra": list(sources.extra),
        **({"device": device} if device else {}),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def gate(
    row: Row, sources: IndexSources, *, deadline: float = GATE_SECONDS, pool: Optional[Dict[str, SimpleIndex]] = None
) -> List[IndexCheck]:
    """Every index the row needs, asked at once under one deadline. The mirror comes first."""
    needs = [
        IndexNeed(name, sources.urls_for(name), row.packages_from(name)) for name in [MIRROR, *row.named_indexes()]
    ]
    return check_indexes(needs, deadline=deadline, indexes=pool)


@dataclass
class _Roots:
    """Root requirements of the resolution and where each comes from (for the `via` chains)."""

    requirements: List[str] = field(default_factory=list)
    origin: Dict[str, List[str]] = field(default_factory=dict)

    def add(self, requirement: str, name: str, origin: str) -> None:
        self.requirements.append(requirement)
        self.origin.setdefault(name, [])
        if origin not in self.origin[name]:
            self.origin[name].append(origin)


def _roots(row: Row, derived: List[Derived], unavailable: Mapping[str, str]) -> _Roots:
    roots = _Roots()
    for requirement in cann_requirements(row):
        roots.add(requirement, requirement.split(">")[0], "CANN compiler")
    for d in derived:
        if d.included and d.name not in unavailable:
            for source in d.sources:
                roots.add(d.requirement(), d.name, source.split(":")[0])
    for name, version in row.packages.items():
        if name not in NO_DEPS and name not in unavailable:
            roots.add(f"{name}=={version}", name, f"row {row.cann}")
    roots.requirements = list(dict.fromkeys(roots.requirements))
    return roots


def _chains(resolved: List[Resolved], origin: Mapping[str, List[str]]) -> Dict[str, List[str]]:
    """The shortest requirement chain from an origin (vllm, vllm-ascend, the row, CANN) to each package."""
    parents = {r.name: r.parents for r in resolved}
    chains: Dict[str, List[str]] = {}
    for r in resolved:
        queue = deque([[r.name]])
        seen = {r.name}
        while queue:
            path = queue.popleft()
            head = path[0]
            if ROOT_PROJECT in parents.get(head, []) or (head in origin and not parents.get(head)):
                chains[r.name] = [" -> ".join([o, *path]) for o in origin.get(head, ["requested"])]
                break
            for parent in parents.get(head, []):
                if parent not in seen and parent != ROOT_PROJECT:
                    seen.add(parent)
                    queue.append([parent, *path])
        chains.setdefault(r.name, [])
    return chains


def _file_for_metadata(choice: Choice, pages_files: List[IndexFile]) -> Optional[IndexFile]:
    """The chosen file, else any file of the pinned version (its metadata is the same)."""
    if choice.file is not None:
        return choice.file
    same = [f for f in pages_files if choice.version is None or str(f.version) == choice.version]
    return next((f for f in same if f.kind == "wheel"), same[0] if same else None)


def _locked(choice: Choice, index: str, index_url: str) -> LockedPackage:
    f = choice.file
    return LockedPackage(
        name=choice.name,
        version=choice.version,
        outcome=choice.outcome,
        index=index,
        index_url=f.index if f else index_url,
        file=f.filename if f else None,
        url=f.url if f else None,
        sha256=f.sha256 if f else None,
        size=f.size if f else None,
        reason=choice.reason,
    )


def _fill_sizes(packages: List[LockedPackage]) -> None:
    """HTML indexes give no sizes: ask the file servers (one tiny request each, concurrently)."""
    missing = [p for p in packages if p.url and p.size is None and not p.url.startswith("file:")]

    def size_of(p: LockedPackage) -> Optional[int]:
        try:
            return content_length(p.url or "")
        except IndexUnreachable:
            return None

    with ThreadPoolExecutor(max_workers=16) as pool:
        for p, size in zip(missing, pool.map(size_of, missing)):
            p.size = size


def _backends(packages: List[LockedPackage], files: Mapping[str, IndexFile], warnings: List[LockWarning]) -> None:
    """Read each sdist's build backend from its pyproject.toml and say what its build needs."""
    sdists = [p for p in packages if p.outcome == "sdist" and p.name in files]
    cache = FileTextCache(files_cache())

    def read(p: LockedPackage) -> Tuple[LockedPackage, Optional[BuildSystem], str]:
        try:
            return p, build_system(files[p.name], cache), ""
        except (IndexUnreachable, OSError, ValueError) as exc:
            return p, None, str(exc)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for p, table, error in pool.map(read, sdists):
            if table is None:
                warnings.append(
                    LockWarning(
                        id="sdist-unread",
                        package=p.name,
                        message=f"{p.name} {p.version}: its build backend could not be read ({error})",
                    )
                )
                continue
            p.backend = str(table["build-backend"])
            needs = toolchain_for(p.backend, table.get("requires", []))
            warnings.append(
                LockWarning(
                    id="sdist-build",
                    package=p.name,
                    message=(
                        f"{p.name} {p.version} has no wheel for this target ({p.reason}): it is built from source with "
                        f"{p.backend}" + (f", which needs {needs}" if needs else "")
                    ),
                )
            )


def _gate_results(checks: List[IndexCheck], row: Row) -> Dict[str, str]:
    """package -> why it cannot be had (its index is unreachable, or no index serves its pin)."""
    unavailable: Dict[str, str] = {}
    for check in checks:
        if check.error:
            for name in check.need.pins:
                unavailable[name] = check.message()
        for name in check.missing:
            unavailable[name] = IndexCheck(check.need, missing={name: check.missing[name]}).message()
        for name in check.unanswered:
            unavailable[name] = IndexCheck(check.need, unanswered={name: check.unanswered[name]}).message()
    return unavailable


@dataclass
class PreparedClosure:
    """Everything the resolution needs, read from the indexes: the uv request and what the lock adds."""

    request: ClosureRequest
    roots: _Roots
    groups: Dict[str, IndexSet]
    unavailable: Dict[str, str]
    heads: Dict[str, Tuple[Choice, List[IndexFile]]]
    derived: List[Derived]


def for_device(
    choice: Choice, row: Row, pages: Sequence[ProjectPage], spec: SpecifierSet, target: Target, device: Optional[str]
) -> Choice:
    """A published wheel built for one device type (the row's `wheel_device`: vllm-ascend's are A2) is
    taken only for that device type; for another the sdist is built, and the reason says so. With the
    target's device type unknown the wheel stands, and the reason says what it was built for."""
    made_for = row.wheel_device_of(choice.name, target.arch)
    if choice.outcome != "wheel" or made_for is None or device == made_for:
        return choice
    if device is None:
        note = f"the wheel is built for {label(made_for)} NPUs only; this target's device type is unknown (--soc)"
        return Choice(
            choice.name, choice.outcome, choice.version, choice.file, "; ".join(filter(None, [choice.reason, note]))
        )
    return from_source(
        choice.name,
        pages,
        spec,
        target,
        f"the published wheel is built for {label(made_for)} NPUs "
        f"and the target is {label(device)}: built from source for {label(device)}",
    )


def prepare_closure(
    row: Row,
    target: Target,
    sources: IndexSources,
    *,
    gate_seconds: float = GATE_SECONDS,
    checks: Optional[List[IndexCheck]] = None,
    pool: Optional[Dict[str, SimpleIndex]] = None,
    on_derived: Optional[Callable[[List[Derived]], None]] = None,
    build_python: Optional[str] = None,
    device: Optional[str] = None,
) -> PreparedClosure:
    """The gate, vllm's and vllm-ascend's requirements, the derived set, and the request for uv; `device`
    (A2, A3, ...) decides whether vllm-ascend's published wheel can be taken (`for_device`)."""
    pool = {} if pool is None else pool
    checks = checks if checks is not None else gate(row, sources, deadline=gate_seconds, pool=pool)
    if checks[0].error:
        raise IndexUnreachable(checks[0].message(), hint=checks[0].hint())
    unavailable = _gate_results(checks, row)
    groups = {name: IndexSet(sources.urls_for(name), pool=pool) for name in [MIRROR, *sources.named]}
    reader = MetadataReader(FileTextCache(files_cache()))
    heads = {}
    for name in NO_DEPS:
        pages = groups[row.index_of(name)].pages(name)
        spec = SpecifierSet(f"=={row.packages[name]}")
        heads[name] = (
            for_device(choose(name, pages, spec, target), row, pages, spec, target, device),
            [f for p in pages for f in p.files if str(f.version) == row.packages[name]],
        )
    meta_files = {n: _file_for_metadata(c, files) for n, (c, files) in heads.items()}
    missing = [n for n, f in meta_files.items() if f is None]
    if missing:
        raise IndexUnreachable(
            f"{missing[0]} {row.packages[missing[0]]} is on none of "
            f"{', '.join(groups[MIRROR].urls)}: its requirements cannot be read",
            hint=heads[missing[0]][0].reason,
        )
    with ThreadPoolExecutor(max_workers=2) as tp:
        found = {n: f for n, f in meta_files.items() if f is not None}  # all of them: none is missing
        vllm_req, plugin_req = tp.map(lambda n: reader.requires(found[n]), NO_DEPS)
    derived = derive(row, vllm_req, plugin_req, target_environment(target))
    if on_derived is not None:
        on_derived(derived)
    roots = _roots(row, derived, unavailable)
    named_used = {row.index_of(n) for n in row.packages if row.index_of(n) != MIRROR and n not in unavailable}
    request = ClosureRequest(
        target=target,
        default_index=sources.mirror,
        roots=roots.requirements,
        overrides=[f"{n}=={v}" for n, v in row.packages.items() if n not in NO_DEPS and n not in unavailable],
        excludes=[*SUBSTITUTES, *NO_DEPS, *unavailable],
        extra_index_urls=list(sources.extra),
        named_indexes={n: sources.named[n] for n in sources.named if n in named_used},
        sources={n: row.index_of(n) for n in row.packages if row.index_of(n) in named_used and n not in unavailable},
        build_python=build_python,
    )
    return PreparedClosure(request, roots, groups, unavailable, heads, derived)


def resolve_closure(
    row: Row,
    target: Target,
    sources: IndexSources,
    *,
    settings: PipSettings,
    uv: Sequence[str],
    cache_dir: Optional[Path] = None,
    gate_seconds: float = GATE_SECONDS,
    checks: Optional[List[IndexCheck]] = None,
    pool: Optional[Dict[str, SimpleIndex]] = None,
    on_derived: Optional[Callable[[List[Derived]], None]] = None,
    build_python: Optional[str] = None,
    device: Optional[str] = None,
) -> Lock:
    """The whole closure of `row` (already specialised for `target.arch`) for `target`; `build_python`, an
    interpreter of the target's Python at hand, runs sdists' build backends (see `uvcompile`); `device`, the
    target's NPU device type, decides vllm-ascend's wheel (`for_device`)."""
    prepared = prepare_closure(
        row,
        target,
        sources,
        gate_seconds=gate_seconds,
        checks=checks,
        pool=pool,
        on_derived=on_derived,
        build_python=build_python,
        device=device,
    )
    resolved = compile_closure(prepared.request, uv=uv, network=settings, cache_dir=cache_dir)
    resolved += [Resolved(n, row.packages[n], [ROOT_PROJECT]) for n in NO_DEPS]
    prepared.roots.origin.update({n: [f"row {row.cann}"] for n in NO_DEPS})
    return _lock_from(row, target, sources, resolved, prepared, device)


def _lock_from(
    row: Row,
    target: Target,
    sources: IndexSources,
    resolved: List[Resolved],
    prepared: PreparedClosure,
    device: Optional[str] = None,
) -> Lock:
    roots, groups, unavailable, heads = prepared.roots, prepared.groups, prepared.unavailable, prepared.heads

    def index_of(name: str) -> str:
        return row.index_of(name) if name in row.packages else MIRROR

    def listed_wheel(r: Resolved) -> Optional[Choice]:
        """The wheel pip would take among the files uv listed for the target; None when they hold none."""
        if not r.files:
            return None
        choice = choose(
            r.name, [ProjectPage(r.name, r.index_url or "", r.files)], SpecifierSet(f"=={r.version}"), target
        )
        return choice if choice.outcome == "wheel" else None

    choices: Dict[str, Choice] = {n: heads[n][0] for n in heads}
    for r in resolved:
        if r.name not in choices:
            wheel = listed_wheel(r)
            if wheel is not None:
                choices[r.name] = wheel
    # the rest (an sdist, or no files listed) from their index pages, which also say why there is no wheel
    rest = [r for r in resolved if r.name not in choices]
    by_group: Dict[str, List[str]] = {}
    for r in rest:
        by_group.setdefault(index_of(r.name), []).append(r.name)
    with ThreadPoolExecutor(max_workers=max(1, len(by_group))) as tp:
        list(tp.map(lambda g: groups[g].prefetch(by_group[g]), by_group))
    for r in rest:
        choices[r.name] = choose(r.name, groups[index_of(r.name)].pages(r.name), SpecifierSet(f"=={r.version}"), target)
    chains = _chains(resolved, roots.origin)
    requires: Dict[str, List[str]] = {}
    for r in resolved:
        for parent in r.parents:
            requires.setdefault(parent, []).append(r.name)
    packages: List[LockedPackage] = []
    files: Dict[str, IndexFile] = {}
    for r in resolved:
        index = index_of(r.name)
        choice = choices[r.name]
        locked = _locked(choice, index, sources.urls_for(index)[0])
        locked.via, locked.requires = chains[r.name], sorted(requires.get(r.name, []))
        locked.no_deps = r.name in NO_DEPS
        if choice.file is not None:
            files[r.name] = choice.file
        packages.append(locked)
    for name, why in unavailable.items():
        packages.append(
            LockedPackage(
                name=name,
                version=row.packages.get(name),
                outcome="unavailable",
                index=index_of(name),
                index_url=sources.urls_for(index_of(name))[0],
                reason=why,
                via=[f"row {row.cann}"],
            )
        )
    _fill_sizes(packages)
    warnings = _warnings(row, target, packages, prepared.derived)
    _backends(packages, files, warnings)
    return Lock(
        cann=row.cann,
        target=LockTarget.of(target, device),
        indexes=sources.as_dict(),
        extra_index_urls=list(sources.extra),
        inputs=inputs_digest(row, target, sources, device),
        packages=sorted(packages, key=lambda p: p.name),
        warnings=warnings,
    )


def _warnings(row: Row, target: Target, packages: List[LockedPackage], derived: List[Derived]) -> List[LockWarning]:
    warnings = [
        LockWarning(id="unavailable", package=p.name, message=p.reason or "")
        for p in packages
        if p.outcome == "unavailable"
    ]
    sdists = [p.name for p in packages if p.outcome == "sdist"]
    warnings += [
        LockWarning(id="known-build", package=name, message=text)
        for name, text in build_warnings(sdists, target.glibc_tuple, row.build_minutes)
    ]
    stripped = {d.name for d in derived if not d.included and d.why.startswith("CUDA-only")}
    for p in packages:
        # A package vllm's list names as CUDA-only that another kept package requires stays in: removing it
        # breaks that package's import (xgrammar imports tvm_ffi). Kept on purpose, and said.
        if p.name in stripped and p.outcome != "unavailable" and p.name not in row.packages:
            chain = p.via[0] if p.via else "another package"
            warnings.append(
                LockWarning(
                    id="cuda-only-kept",
                    package=p.name,
                    message=(
                        f"{p.name} is stripped from vllm's requirements as CUDA-only, but {chain} requires it: "
                        "kept, because the package that requires it cannot be imported without it"
                    ),
                )
            )
    return warnings
