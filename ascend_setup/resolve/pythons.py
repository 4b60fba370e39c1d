"""Which Python the venv should use: the newest in the row's range for which every binary package of
the row publishes a wheel for this host.

The newest interpreter in range was 3.12 on a real host, and no triton-ascend release has a cp312
wheel: the install failed at its last package step. The indexes know this before anything is
installed, so the choice asks them (the same pages the reachability gate reads).
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ascend_setup.errors import AscendSetupError, BadInput, named_by
from ascend_setup.host.interpreters import PREFERRED, Interpreter, choose_interpreter, find_interpreters, probe
from ascend_setup.host.machine import GLIBC_FLOOR, glibc_version
from ascend_setup.host.os_hints import python_install_hint
from ascend_setup.index.choose import choose
from ascend_setup.index.simple import IndexSet, ProjectPage, SimpleIndex
from ascend_setup.index.tags import Target, parse_python
from ascend_setup.managed.pinned import MANAGED, PythonBuild, PythonBuilds, load_builds
from ascend_setup.matrix.models import Row
from ascend_setup.resolve.closure import IndexSources, gate

if TYPE_CHECKING:
    from ascend_setup.resolve.index_session import IndexSession


@dataclass
class PythonChoice:
    interpreter: Interpreter
    reasons: List[str]  # why newer interpreters were passed over
    gaps: List[str]  # what the chosen one still lacks (each a source build or unavailable)
    managed: Optional[PythonBuild] = None  # the pinned build to install (the interpreter's path is then "")


def binary_packages(row: Row, pages: Dict[str, List[ProjectPage]]) -> List[str]:
    """Row packages that publish platform wheels at their pinned version (pure and sdist-only ones
    fit every Python alike)."""
    found = []
    for name, version in row.packages.items():
        files = [f for p in pages.get(name, []) for f in p.files if str(f.version) == version and f.kind == "wheel"]
        if any(t.platform != "any" for f in files for t in f.tags):
            found.append(name)
    return found


def wheel_gaps(row: Row, python: str, arch: str, glibc: str, pages: Dict[str, List[ProjectPage]]) -> Dict[str, str]:
    """package -> "triton-ascend 3.2.2 has no cp312 wheel for ...", for the binary row packages with no wheel
    for this host under `python`."""
    target = Target(glibc=glibc, arch=arch, python=python)
    gaps = {}
    for name in binary_packages(row, pages):
        choice = choose(name, pages[name], SpecifierSet(f"=={row.packages[name]}"), target, binary_only=True)
        if choice.file is None:
            gaps[name] = (
                f"{name} {row.packages[name]} has no cp{python.replace('.', '')} wheel for {arch} / glibc {glibc}"
            )
    return gaps


def row_pages(
    row: Row, sources: IndexSources, deadline: float, pool: Optional[Dict[str, SimpleIndex]] = None
) -> Optional[Dict[str, List[ProjectPage]]]:
    """The row packages' project pages from the indexes that answered within `deadline` (an index that
    did not is never asked again); None when the mirror did not answer. `pool`: the command's (IndexSession)."""
    pool = {} if pool is None else pool
    checks = gate(row, sources, deadline=deadline, pool=pool)
    if checks[0].error:
        return None
    answered = {c.need.name for c in checks if c.error is None}
    groups = {name: IndexSet(sources.urls_for(name), pool=pool) for name in answered}
    return {n: groups[row.index_of(n)].pages(n) if row.index_of(n) in groups else [] for n in row.packages}


def choose_python(
    row: Row, candidates: Sequence[Interpreter], arch: str, glibc: str, pages: Optional[Dict[str, List[ProjectPage]]]
) -> PythonChoice:
    """The newest candidate with the fewest wheel gaps (none, when the indexes allow)."""
    ordered = sorted(candidates, key=lambda i: Version(i.version), reverse=True)
    unasked = [n for n in row.wheel_pythons if pages is None or not binary_packages(row, {n: pages.get(n, [])})]
    known = [i for i in ordered if all(i.minor in row.wheel_pythons[n] for n in unasked)]
    if unasked and known and known[0] is not ordered[0]:
        ordered = known
        said = ", ".join(f"{n} {row.packages[n]}" for n in unasked)
        note = (
            f"{ordered[0].minor}: its index could not be asked, so the newest Python that {said} is known "
            f"(from the matrix) to have wheels for"
        )
        if pages is None:
            return PythonChoice(ordered[0], [note], [])
        choice = choose_python(row, ordered, arch, glibc, pages)
        return PythonChoice(choice.interpreter, [note, *choice.reasons], choice.gaps)
    if pages is None:
        return PythonChoice(ordered[0], ["the indexes could not be asked which Pythons the row's wheels exist for"], [])
    gaps = {i.minor: wheel_gaps(row, i.minor, arch, glibc, pages) for i in ordered}
    fewest = min(len(g) for g in gaps.values())
    chosen = next(i for i in ordered if len(gaps[i.minor]) == fewest)
    shared = gaps[chosen.minor]
    reasons = [
        f"{i.minor} passed over: {'; '.join(m for n, m in gaps[i.minor].items() if n not in shared)}"
        for i in ordered
        if Version(i.version) > Version(chosen.version) and len(gaps[i.minor]) > fewest
    ]
    return PythonChoice(chosen, reasons, list(shared.values()))


def row_minors(row: Row) -> List[str]:
    """The CPython minors the row's range allows (3.8 to 3.15 considered), newest first."""
    spec = SpecifierSet(row.python)
    return [f"3.{m}" for m in range(15, 7, -1) if spec.contains(f"3.{m}.0", prereleases=True)]


def managed_choice(
    row: Row,
    sources: IndexSources,
    arch: str,
    glibc: str,
    builds: PythonBuilds,
    why: str,
    *,
    deadline: float = 5.0,
    pool: Optional[Dict[str, SimpleIndex]] = None,
) -> PythonChoice:
    """A managed CPython: of the row's minors that have a pinned build for `arch`, the one the row's wheels
    want, by the rule an interpreter on the host is chosen by (choose_python)."""
    minors = [m for m in row_minors(row) if builds.find(m, arch) is not None]
    if not minors:
        raise AscendSetupError(
            f"{why}, and no pinned CPython build for {arch} is in the row's range {row.python}",
            hint=f"{python_install_hint(PREFERRED)}; then pass --python /path/to/python{PREFERRED}",
        )
    candidates = [Interpreter(path="", version=_build(builds, m, arch).version, has_venv=True) for m in minors]
    pages = row_pages(row, sources, deadline, pool) if len(candidates) > 1 else None
    choice = (
        choose_python(row, candidates, arch, glibc, pages)
        if len(candidates) > 1
        else PythonChoice(candidates[0], [], [])
    )
    build = _build(builds, choice.interpreter.minor, arch)
    note = f"{why}: a managed CPython {build.version} ({build.build} build) will be installed in the workdir"
    return PythonChoice(choice.interpreter, [note, *choice.reasons], choice.gaps, managed=build)


def _build(builds: PythonBuilds, minor: str, arch: str) -> PythonBuild:
    found = builds.find(minor, arch)
    assert found is not None, (minor, arch)  # the callers choose among the minors that have one
    return found


def pick_python(
    row: Row,
    sources: IndexSources,
    arch: str,
    glibc: str,
    *,
    explicit: Optional[str] = None,
    local: bool = True,
    deadline: float = 5.0,
    pool: Optional[Dict[str, SimpleIndex]] = None,
    found: Optional[List[Interpreter]] = None,
    builds: Optional[PythonBuilds] = None,
) -> PythonChoice:
    """The interpreter an install of `row` would use. `explicit` (--python) always wins, its gaps reported;
    `local=False` (a target that is not this machine) chooses among the row's Python versions instead.
    `found`: this machine's interpreters when the caller has searched already (a search is seconds).
    With no interpreter in the row's range on this machine, or `explicit` "managed": a managed CPython from
    the pinned builds (`builds`, else the packaged file). An error about `explicit` names the value only: the
    caller adds the flag (BadInput.given_as)."""
    if explicit == MANAGED:
        return managed_choice(
            row, sources, arch, glibc, builds or load_builds(), "--python managed", deadline=deadline, pool=pool
        )
    if explicit:
        interp = choose_interpreter(row.python, explicit)
        pages = row_pages(row, sources, deadline, pool)
        gaps = wheel_gaps(row, interp.minor, arch, glibc, pages) if pages else {}
        return PythonChoice(interp, [], list(gaps.values()))
    if local:
        everything = find_interpreters() if found is None else found
        found = [i for i in everything if row.python_allows(i.version) and i.has_venv]
        if not found:
            seen = ", ".join(sorted({i.version for i in everything})) or "none"
            return managed_choice(
                row,
                sources,
                arch,
                glibc,
                builds or load_builds(),
                f"no Python in {row.python} with venv support on this host (seen: {seen})",
                deadline=deadline,
                pool=pool,
            )
    else:
        found = [Interpreter(path="", version=f"{minor}.0", has_venv=True) for minor in row_minors(row)]
    minors = {i.minor for i in found}
    pages = row_pages(row, sources, deadline, pool) if len(minors) > 1 else None
    if len(minors) == 1:
        return PythonChoice(max(found, key=lambda i: Version(i.version)), [], [])
    return choose_python(row, found, arch, glibc, pages)


def decide_python(
    row: Row,
    sources: IndexSources,
    *,
    explicit: Optional[str] = None,
    pool: Optional[Dict[str, SimpleIndex]] = None,
    found: Optional[List[Interpreter]] = None,
    builds: Optional[PythonBuilds] = None,
) -> PythonChoice:
    """The interpreter an install of `row` takes on this machine: the one rule preflight, `install --dry-run`,
    `plan` (for this machine), doctor and the fleet report follow, so their answers cannot drift apart."""
    return pick_python(
        row,
        sources,
        platform.machine(),
        glibc_version() or GLIBC_FLOOR,
        explicit=explicit,
        pool=pool,
        found=found,
        builds=builds,
    )


def names_interpreter(value: str) -> bool:
    """Whether a --python value is an interpreter's path rather than a version such as 3.11."""
    return "/" in value or Path(value).exists()


def explicit_python(value: str, row: Row) -> str:
    """X.Y of a --python given as a version (3.11) or as an interpreter's path, inside the row's range (its
    errors name the value; the caller adds where it was given)."""
    if names_interpreter(value):
        interp = probe(value)
        if interp is None:
            raise BadInput(f"{value} is not a working Python interpreter")
        minor = interp.minor
    else:
        minor = parse_python(value)
    if not row.python_allows(f"{minor}.0"):
        raise BadInput(
            f"{value} is Python {minor}, outside the row's range {row.python} (CANN {row.cann})",
            hint=f"use one of {', '.join(row_minors(row))}",
        )
    return minor


def build_interpreter(minor: str, known: Optional[str] = None) -> Optional[str]:
    """An interpreter of Python `minor` for uv's sdist metadata builds, found without starting one: this
    process's own when it is that Python, else `known` (the one the install picked, or --python's path).
    None lets uv look for one itself, which is slow behind a version manager's shims."""
    if "%d.%d" % sys.version_info[:2] == minor:
        return sys.executable
    return known or None


def target_python(
    value: Optional[str],
    row: Row,
    sources: IndexSources,
    arch: str,
    glibc: str,
    index: Optional[IndexSession] = None,
    source: str = "--python",
) -> Tuple[str, str]:
    """(Python X.Y, a note when it was assumed). A version or an interpreter (--python, ASCEND_SETUP_PYTHON)
    wins; else the interpreter the install would pick here; else, for another machine or when none here is
    in the row's range, the newest version the row's wheels support, said plainly. `source`: where `value`
    was given, for its errors."""
    if value:
        with named_by(source):
            return explicit_python(value, row), ""
    pool = index.pool() if index else None
    local = arch == platform.machine() and glibc == (glibc_version() or "")
    if local:
        try:
            choice = decide_python(row, sources, pool=pool)
            return choice.interpreter.minor, (choice.reasons[0] if choice.managed else "")
        except AscendSetupError:
            pass
    minor = pick_python(row, sources, arch, glibc, local=False, pool=pool).interpreter.minor
    where = (
        "the target machine's interpreters are unknown here"
        if not local
        else f"no interpreter in the row's range {row.python} was found on this machine"
    )
    return minor, f"{where}: forecasting for Python {minor}, the newest the row's wheels support (--python to choose)"
