"""Resolve a shared object's needs as glibc's loader would (`elf/dl-load.c`), for a target.

For each NEEDED name of each object in the load, breadth first: a name with a slash is a path; otherwise the
requester's DT_RPATH and those of the objects that loaded it (unless the requester has a DT_RUNPATH), then
LD_LIBRARY_PATH, the requester's DT_RUNPATH, ldconfig's cache and the default directories; a candidate of
another class or machine is passed over, as the loader does. Last, the venv's own libraries by SONAME: one that
an earlier import loaded (torch's libraries for torch_npu's) satisfies a NEEDED of that name. Each version a
venv object requires must be defined by the object its file resolved to, except glibc's own (`GLIBC_2.x`),
which are held against the target's glibc, since that is what the target's libc defines. Strong undefined
symbols must be exported by the interpreter's load or this one's.
"""

from __future__ import annotations

import os
import platform
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

from packaging.version import Version

from ascend_setup.native.elf import DamagedElf, ElfNeeds, read_needs
from ascend_setup.native.ldcache import DEFAULT_DIRS

_GLIBC_VERSION = re.compile(r"GLIBC_(2\.\d+(?:\.\d+)?)$")
#: How many undefined symbols a finding names (a mismatched build leaves thousands).
SHOWN_SYMBOLS = 5
#: A symbol every CPython's load exports (the executable's, or its libpython's).
INTERPRETER_SYMBOL = "Py_Initialize"


@dataclass(frozen=True)
class Target:
    """The machine the libraries must load on: its glibc, the LD_LIBRARY_PATH they will run with, and where
    its system libraries are (this host's: ldconfig's cache, else ld.so.conf's and the default directories)."""

    glibc: Optional[str]
    library_path: Tuple[str, ...]
    cache: Mapping[str, Sequence[str]]
    system_dirs: Tuple[str, ...]
    label: str
    machine: str = field(default_factory=platform.machine)  # 'x86_64', 'aarch64': as elf.MACHINES names them
    elf_class: int = 64  # the tool's targets are 64-bit

    def default_dirs(self, elf_class: int) -> Tuple[str, ...]:
        return self.system_dirs + tuple(d for d in DEFAULT_DIRS.get(elf_class, ()) if d not in self.system_dirs)


def library_path(env: Mapping[str, str]) -> Tuple[str, ...]:
    """LD_LIBRARY_PATH's directories, as the loader splits it (`:` and `;`; an empty entry is the cwd, which a
    check run from elsewhere cannot stand for, so it is left out)."""
    return tuple(p for p in re.split(r"[:;]", env.get("LD_LIBRARY_PATH", "")) if p)


@dataclass
class Problem:
    """One thing the loader would refuse, for one library of the venv."""

    kind: str  # unresolved | glibc | version | symbol | damaged | outside | loop | abi
    library: Path  # the venv's file the load starts from
    needs: str  # what it needs that the target lacks: 'libatb.so', 'GLIBC_2.34', 'symbol atb_runtime_9_1'
    detail: str  # the loader's side: where it looked, what the target has
    loader_message: str  # what the loader itself would print (triage reads it for the fix)
    through: Optional[Path] = None  # the object in the load that has the need, when not `library` itself


@dataclass
class _Loaded:
    needs: ElfNeeds
    parent: Optional[_Loaded]
    name: str  # the name it was loaded as

    def chain(self) -> Iterator[_Loaded]:
        """This object, then the one that loaded it, up to the root."""
        item: Optional[_Loaded] = self
        while item is not None:
            yield item
            item = item.parent

    def ancestry(self) -> Set[Path]:
        return {item.needs.path for item in self.chain()}


@dataclass
class _Load:
    """One dlopen's walk: the objects in load order, what each NEEDED resolved to, what did not, a loop."""

    order: List[ElfNeeds]
    loaded: Dict[str, _Loaded]
    resolved: Dict[Tuple[Path, str], ElfNeeds] = field(default_factory=dict)
    missing: List[Tuple[_Loaded, str, List[str]]] = field(default_factory=list)
    loop: Optional[List[str]] = None


@dataclass
class Resolver:
    """Resolution for one target over one venv; each file is read once, whatever loads it."""

    target: Target
    venv_root: Path
    venv_sonames: Dict[str, Path] = field(default_factory=dict)
    interpreter: Optional[Path] = None
    _read: Dict[Path, Union[ElfNeeds, str]] = field(default_factory=dict)
    _files: Dict[str, Optional[ElfNeeds]] = field(default_factory=dict)
    _inside: Dict[Path, bool] = field(default_factory=dict)
    _scope: Optional[List[ElfNeeds]] = None
    _preloaded: Dict[str, ElfNeeds] = field(default_factory=dict)
    _root: Path = field(init=False)

    def __post_init__(self) -> None:
        self._root = Path(os.path.realpath(self.venv_root))

    def read(self, path: Path) -> Union[ElfNeeds, str]:
        """The object at `path`, or why it is none (kept: a library many others need is read once)."""
        if path not in self._read:
            try:
                self._read[path] = read_needs(path)
            except DamagedElf as exc:
                self._read[path] = str(exc)
        return self._read[path]

    def inside_venv(self, path: Path) -> bool:
        if path not in self._inside:
            self._inside[path] = _inside(Path(os.path.realpath(path)), self._root)
        return self._inside[path]

    def _candidate(self, path: str, abi: Tuple[int, str]) -> Optional[ElfNeeds]:
        """The object at `path` when it is a library of `abi` (each path looked at once, whoever asks)."""
        if path not in self._files:
            found = self.read(Path(path)) if os.path.isfile(path) else None
            self._files[path] = found if isinstance(found, ElfNeeds) else None
        found = self._files[path]
        return found if found is not None and found.abi == abi else None

    def find(self, name: str, requester: _Loaded) -> Tuple[Optional[ElfNeeds], List[str]]:
        """(the object `name` resolves to, or None; the places looked, in the loader's order)."""
        abi = requester.needs.abi
        if "/" in name:
            return self._candidate(name, abi), [name]
        looked: List[str] = []
        dirs: List[Tuple[str, str]] = []
        if not requester.needs.runpath:
            for item in requester.chain():
                dirs += [(d, f"RPATH of {item.needs.path.name}") for d in _expand(item.needs.rpath, item.needs)]
        dirs += [(d, "LD_LIBRARY_PATH") for d in self.target.library_path]
        dirs += [
            (d, f"RUNPATH of {requester.needs.path.name}") for d in _expand(requester.needs.runpath, requester.needs)
        ]
        for directory, why in dirs:
            looked.append(f"{directory} ({why})")
            found = self._candidate(os.path.join(directory, name), abi)
            if found is not None:
                return found, looked
        looked.append("ldconfig's cache" if self.target.cache else "ldconfig's cache (none readable)")
        for path in self.target.cache.get(name, ()):
            found = self._candidate(path, abi)
            if found is not None:
                return found, looked
        for directory in self.target.default_dirs(abi[0]):
            found = self._candidate(os.path.join(directory, name), abi)
            if found is not None:
                return found, looked + [directory]
        looked.append(", ".join(self.target.default_dirs(abi[0])))
        owner = self.venv_sonames.get(name)
        looked.append("the venv's libraries (by SONAME)")
        if owner is not None:
            return self._candidate(str(owner), abi), looked
        return None, looked

    def global_scope(self) -> List[ElfNeeds]:
        """The interpreter and what it loads: where an extension module's Py* symbols come from."""
        self._interpreter_load()
        return self._scope or []

    def _interpreter_load(self) -> Dict[str, ElfNeeds]:
        """What is loaded before any import, by every name it was loaded as (libc.so.6, libpython3.11.so.1.0):
        a NEEDED of one of those names is that object, as the loader matches loaded objects first."""
        if self._scope is None:
            self._scope = []
            program = self.read(self.interpreter) if self.interpreter else "no interpreter"
            if isinstance(program, ElfNeeds):
                load = self._load(_Loaded(program, None, program.path.name), {})
                self._scope = load.order
                self._preloaded = {name: item.needs for name, item in load.loaded.items()}
        return self._preloaded

    def _load(self, root: _Loaded, preloaded: Mapping[str, ElfNeeds]) -> _Load:
        """Breadth first, each object once, as the loader walks a dlopen's dependencies (`preloaded`: the objects
        already loaded, by name)."""
        load = _Load(order=[root.needs], loaded={root.name: root})
        if root.needs.soname:
            load.loaded.setdefault(root.needs.soname, root)
        seen: Set[Path] = {root.needs.path}
        queue: Deque[_Loaded] = deque([root])
        while queue:
            item = queue.popleft()
            for name in item.needs.needed:
                known = load.loaded.get(name)
                if known is not None:
                    load.resolved[(item.needs.path, name)] = known.needs
                    if known.needs.path in item.ancestry() and load.loop is None:
                        load.loop = [*reversed([a.name for a in item.chain()]), name]
                    continue
                early = preloaded.get(name)
                if early is not None and early.abi == item.needs.abi:
                    load.resolved[(item.needs.path, name)] = early
                    continue
                found, looked = self.find(name, item)
                if found is None:
                    load.missing.append((item, name, looked))
                    continue
                load.resolved[(item.needs.path, name)] = found
                entry = _Loaded(found, item, name)
                load.loaded[name] = entry
                if found.soname:
                    load.loaded.setdefault(found.soname, entry)
                if found.path not in seen:
                    seen.add(found.path)
                    load.order.append(found)
                    queue.append(entry)
        return load

    def check(self, path: Path) -> List[Problem]:
        """Everything the loader would refuse when the venv's file at `path` is loaded on the target."""
        first = self.read(path)
        if isinstance(first, str):
            return [Problem("damaged", path, path.name, first, f"{path}: {first}")]
        if (first.machine, first.elf_class) != (self.target.machine, self.target.elf_class):
            return [
                Problem(
                    "abi",
                    path,
                    f"a {first.elf_class}-bit {first.machine} loader",
                    f"it was built for {first.machine} ({first.elf_class}-bit); {self.target.label} is "
                    f"{self.target.machine} ({self.target.elf_class}-bit)",
                    f"{path}: wrong ELF class or machine ({first.elf_class}-bit {first.machine})",
                )
            ]
        problems: List[Problem] = []
        load = self._load(_Loaded(first, None, path.name), self._interpreter_load())
        if load.loop:
            problems.append(
                Problem(
                    "loop",
                    path,
                    " -> ".join(load.loop),
                    "the libraries need each other in a loop",
                    f"{path}: NEEDED loop {' -> '.join(load.loop)}",
                )
            )
        for requester, name, looked in load.missing:
            through = requester.needs.path if requester.needs.path != path else None
            problems.append(
                Problem(
                    "unresolved",
                    path,
                    name,
                    "looked in " + "; ".join(looked),
                    f"{name}: cannot open shared object file: No such file or directory",
                    through=through,
                )
            )
        versions: List[Problem] = []
        for needs in load.order:
            if self.inside_venv(needs.path):
                versions += self._versions(path, needs, load.resolved)
        problems += versions
        # The loader checks every version need before it binds a symbol, and stops at the first it lacks: a symbol
        # of a too-new glibc (close_range@GLIBC_2.34 on 2.31) is that version's one finding, not a second one.
        if not load.missing and not versions:
            problems += self._symbols(path, load.order)
        return problems

    def _versions(self, library: Path, needs: ElfNeeds, resolved: Dict[Tuple[Path, str], ElfNeeds]) -> List[Problem]:
        problems: List[Problem] = []
        through = needs.path if needs.path != library else None
        too_new = []
        for file, versions in needs.version_needs.items():
            provider = resolved.get((needs.path, file))
            lacking = []
            for version in versions:
                glibc = _GLIBC_VERSION.match(version)
                if glibc and self.target.glibc:
                    if Version(glibc.group(1)) > Version(self.target.glibc):
                        too_new.append((version, file))
                elif provider is not None and version not in provider.version_defs:
                    lacking.append(version)
            if lacking:
                problems.append(
                    Problem(
                        "version",
                        library,
                        ", ".join(lacking),
                        f"{provider.path if provider else file} defines "
                        f"{_some(sorted(provider.version_defs)) if provider else 'nothing'}",
                        f"{provider.path if provider else file}: version `{lacking[0]}' not found "
                        f"(required by {needs.path})",
                        through=through,
                    )
                )
        if too_new:
            newest = max((v for v, _ in too_new), key=lambda v: Version(v.split("_", 1)[1]))
            problems.append(
                Problem(
                    "glibc",
                    library,
                    newest,
                    f"{_some(sorted({v for v, _ in too_new}, key=_glibc_key))} from "
                    f"{', '.join(sorted({f for _, f in too_new}))}; {self.target.label} has glibc "
                    f"{self.target.glibc}",
                    f"/lib/libc.so.6: version `{newest}' not found (required by {needs.path})",
                    through=through,
                )
            )
        return problems

    def _symbols(self, library: Path, order: List[ElfNeeds]) -> List[Problem]:
        scope = self.global_scope()
        if not any(INTERPRETER_SYMBOL in o.exported for o in scope):
            return []  # an interpreter whose exports cannot be read (a launcher, a stripped build): every Py* symbol
            # of every extension would look missing
        offered = scope + order
        problems = []
        for needs in order:
            if not self.inside_venv(needs.path):
                continue
            absent = [s for s in needs.undefined if not any(s in o.exported for o in offered)]
            if absent:
                through = needs.path if needs.path != library else None
                problems.append(
                    Problem(
                        "symbol",
                        library,
                        f"symbol {absent[0]}",
                        f"{len(absent)} undefined symbol{'s' * (len(absent) > 1)} "
                        f"({_some(absent)}) defined by none of "
                        f"{', '.join(o.path.name for o in order[1:]) or 'its needed libraries'} "
                        "nor the interpreter",
                        f"{needs.path}: undefined symbol: {absent[0]}",
                        through=through,
                    )
                )
        return problems


def _glibc_key(version: str) -> Version:
    return Version(version.split("_", 1)[1])


def _some(items: Sequence[str]) -> str:
    return ", ".join(items[:SHOWN_SYMBOLS]) + (
        f" and {len(items) - SHOWN_SYMBOLS} more" if len(items) > SHOWN_SYMBOLS else ""
    )


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _expand(dirs: Sequence[str], needs: ElfNeeds) -> List[str]:
    """$ORIGIN (the object's directory), $LIB and $PLATFORM, as the loader substitutes them."""
    origin = str(needs.path.parent)
    lib = "lib64" if needs.elf_class == 64 else "lib"
    platform = needs.machine
    out = []
    for d in dirs:
        for token, value in (("ORIGIN", origin), ("LIB", lib), ("PLATFORM", platform)):
            d = d.replace("${" + token + "}", value).replace("$" + token, value)
        out.append(os.path.normpath(d))
    return out
