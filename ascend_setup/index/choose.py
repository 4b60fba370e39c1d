"""Choosing a file for a target the way pip does, and saying why when it is not a wheel."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Literal, Optional, Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.version import Version

from ascend_setup.index.simple import IndexFile, ProjectPage
from ascend_setup.index.tags import Target, manylinux_glibc, platform_arch, tag_priorities

#: What a lock does for a package on a target (the lock's field of the same name).
Outcome = Literal["wheel", "sdist", "unavailable"]


@dataclass
class Choice:
    name: str
    outcome: Outcome
    version: Optional[str] = None
    file: Optional[IndexFile] = None
    reason: Optional[str] = None


@lru_cache(maxsize=4096)
def _python_allowed(requires_python: str, python_full: str) -> bool:
    try:
        return SpecifierSet(requires_python).contains(python_full, prereleases=True)
    except InvalidSpecifier:  # an unparsable requires-python is ignored, as pip does
        return True


def _requires_python_ok(f: IndexFile, target: Target) -> bool:
    return not f.requires_python or _python_allowed(f.requires_python, target.python_full)


def _best_rank(f: IndexFile, ranks: Dict[Tag, int]) -> Optional[int]:
    found = [ranks[t] for t in f.tags if t in ranks]
    return min(found) if found else None


def _filter_versions(spec: SpecifierSet, versions: Sequence[Version]) -> List[Version]:
    """pip's rule: prereleases only when the specifier asks or nothing else matches."""
    return list(spec.filter(versions))


def _why_not_wheel(files: List[IndexFile], version: Version, target: Target) -> str:
    wheels = [f for f in files if f.kind == "wheel" and f.version == version]
    if not wheels:
        return "no wheels published"
    if not any(_requires_python_ok(f, target) for f in wheels):
        return f"its wheels require Python {wheels[0].requires_python}"
    cp = f"cp{target.python.replace('.', '')}"
    arch_wheels = [f for f in wheels if any(platform_arch(t.platform) in (target.arch, "any") for t in f.tags)]
    if not arch_wheels:
        arches = sorted({platform_arch(t.platform) for f in wheels for t in f.tags})
        return f"no {target.arch} wheel (wheels for: {', '.join(arches)})"
    py_wheels = [
        f
        for f in arch_wheels
        if any(t.interpreter in (cp, "py3", f"py{target.python.replace('.', '')}") or t.abi == "abi3" for t in f.tags)
    ]
    if not py_wheels:
        return f"no wheel for {cp}"
    needs = [manylinux_glibc(t.platform) for f in py_wheels for t in f.tags if manylinux_glibc(t.platform)]
    if needs and min(needs) > target.glibc_tuple:
        need = ".".join(map(str, min(needs)))
        return f"newest wheel needs glibc {need} (target has {target.glibc})"
    return "no wheel matches the target's tags"


def choose(
    name: str, pages: Sequence[ProjectPage], spec: SpecifierSet, target: Target, binary_only: bool = False
) -> Choice:
    """Pick like pip: installable files, the specifier (prereleases only if asked or nothing else
    matches), yanked only if nothing else, the newest version, then the best tag; an sdist ranks
    below any compatible wheel of its version. Tags are looked at newest version first, and only
    until a version has a file for the target."""
    files = [f for p in pages for f in p.files if _requires_python_ok(f, target)]
    if binary_only:
        files = [f for f in files if f.kind == "wheel"]
    ranks = tag_priorities(target)
    by_version: Dict[Version, List[IndexFile]] = {}
    for f in files:
        by_version.setdefault(f.version, []).append(f)

    def best_of(version: Version, yanked: bool) -> Optional[IndexFile]:
        scored = []
        for f in by_version[version]:
            if f.yanked and not yanked:
                continue
            rank = _best_rank(f, ranks) if f.kind == "wheel" else len(ranks)
            if rank is not None:
                scored.append((-rank, f.build, f))
        return max(scored, key=lambda s: (s[0], s[1]))[2] if scored else None

    def allowed(version: Version, allow_pre: bool) -> bool:
        if version.is_prerelease and not (allow_pre or spec.prereleases):
            return False
        return spec.contains(version, prereleases=True)

    def search(allow_pre: bool, yanked: bool) -> Optional[IndexFile]:
        for version in sorted(by_version, reverse=True):
            if allowed(version, allow_pre):
                found = best_of(version, yanked)
                if found is not None:
                    return found
        return None

    best = search(False, False) or search(False, True) or search(True, False) or search(True, True)
    if best is None:
        return Choice(name, "unavailable", reason=_why_unavailable(name, pages, files, spec, target))
    note = _newer_skipped([f for p in pages for f in p.files], spec, best.version, target)
    if best.kind == "wheel":
        if any(t.platform.startswith("linux_") for t in best.tags):
            note = "; ".join(
                filter(None, ["a linux_* wheel: built for one machine, it may not run on the target", note])
            )
        return Choice(name, "wheel", str(best.version), best, note)
    reason = _why_not_wheel([f for p in pages for f in p.files], best.version, target)
    return Choice(name, "sdist", str(best.version), best, reason + (f"; {note}" if note else ""))


def from_source(name: str, pages: Sequence[ProjectPage], spec: SpecifierSet, target: Target, why: str) -> Choice:
    """The sdist pip would take when the wheels must not be used (`why`: they were built for another device
    type); unavailable, with `why`, when no sdist is published."""
    sdists = [ProjectPage(p.name, p.index, [f for f in p.files if f.kind == "sdist"], p.found, p.error) for p in pages]
    built = choose(name, sdists, spec, target)
    if built.outcome == "unavailable":
        return Choice(name, "unavailable", reason=f"{why}; and no sdist is published to build from")
    return Choice(name, "sdist", built.version, built.file, why)


def _newer_skipped(files: List[IndexFile], spec: SpecifierSet, chosen: Version, target: Target) -> Optional[str]:
    newer = [v for v in _filter_versions(spec, sorted({f.version for f in files if not f.yanked})) if v > chosen]
    if not newer:
        return None
    top = max(newer)
    return f"newer {top} has no file for this target ({_why_not_wheel(files, top, target)})"


def _why_unavailable(
    name: str, pages: Sequence[ProjectPage], files: List[IndexFile], spec: SpecifierSet, target: Target
) -> str:
    parts = []
    for page in pages:
        if page.error:
            parts.append(f"{page.index}: {page.error}")
        elif not page.found or not page.files:
            parts.append(f"{page.index}: no {name}")
        else:
            versions = sorted({f.version for f in page.files}, reverse=True)
            matching = _filter_versions(spec, versions)
            if matching:
                parts.append(
                    f"{page.index} has {name} {max(matching)} "
                    f"but not for this target ({_why_not_wheel(page.files, max(matching), target)})"
                )
            else:
                shown = ", ".join(str(v) for v in versions[:5])
                parts.append(f"{page.index} has only {shown}")
    return f"no file for {name}{spec} on any configured index: " + "; ".join(parts)
