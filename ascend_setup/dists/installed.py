"""What is installed in a venv, read from its dist-info directories (never by running it)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from importlib.metadata import Distribution, PathDistribution
from pathlib import Path
from types import MappingProxyType
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict

from ascend_setup.dists.markers import applicable
from ascend_setup.dists.venv_reader import read_pyvenv_cfg, site_packages, venv_python
from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import PathText, parse_json, read_input_text, validate


class DirectUrl(BaseModel):
    """PEP 610's direct_url.json: the audit reads where a package came from when not from an index."""

    model_config = ConfigDict(extra="ignore", strict=True)

    url: PathText


@dataclass
class Installed:
    """One distribution as its dist-info describes it."""

    name: str
    version: str
    path: Path
    dist: Distribution = field(repr=False)
    requires: List[str] = field(default_factory=list)
    #: The CHECKED_MEMBERS that were readable text, as read_venv read them (each file is read once).
    texts: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def parsed_version(self) -> Optional[Version]:
        try:
            return Version(self.version)
        except InvalidVersion:
            return None

    def read(self, member: str) -> Optional[str]:
        """A dist-info file's text; None when it is missing or damaged (read_venv made a finding of that)."""
        if member in CHECKED_MEMBERS:
            return self.texts.get(member)  # read_venv read and checked it already
        path = self.path / member
        if not path.exists():
            return None
        try:
            return read_input_text(path, "metadata", follow=False)
        except BadInput:
            return None

    def record_paths(self) -> List[str]:
        text = self.read("RECORD") or ""
        return [line.split(",")[0] for line in text.splitlines() if line.strip()]

    def wheel_tags(self) -> List[str]:
        text = self.read("WHEEL") or ""
        return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]

    def installer(self) -> Optional[str]:
        text = self.read("INSTALLER")
        return text.strip() if text else None

    def direct_url(self) -> Optional[DirectUrl]:
        """None when there is none, or when it is damaged (a list, no url, nested past the bounds): a damaged
        file says nothing about where the package came from."""
        text = self.read("direct_url.json")
        if not text:
            return None
        where = f"{self.path / 'direct_url.json'}"
        try:
            return validate(DirectUrl, parse_json(text, where), where)
        except BadInput:
            return None


@dataclass
class VenvContents:
    root: Path
    config: Dict[str, str]
    site: List[Path]
    dists: List[Installed]
    damaged: List[Tuple[Path, str]] = field(default_factory=list)  # (dist-info file, why it cannot be read)
    #: dist-info folders with no readable name (METADATA missing or unreadable): a stopped install leaves them,
    #: and uv still counts each as installed, by its folder's name, so a reinstall skips it
    nameless: List[Path] = field(default_factory=list)

    @property
    def python_version(self) -> Optional[str]:
        return self.config.get("version") or self.config.get("version_info")

    @property
    def system_site_packages(self) -> bool:
        return self.config.get("include-system-site-packages", "false").lower() == "true"

    def by_name(self) -> Dict[str, List[Installed]]:
        grouped: Dict[str, List[Installed]] = {}
        for d in self.dists:
            grouped.setdefault(d.name, []).append(d)
        return grouped

    def get(self, name: str) -> Optional[Installed]:
        found = self.by_name().get(canonicalize_name(name))
        return found[0] if found else None


def read_venv(root: Path) -> VenvContents:
    """Every dist-info/egg-info in the venv's site-packages. A path that is not a venv is bad input.

    An install reads its venv about 20 times (each step before and after it runs), many of them with nothing changed
    since the last: the last reading of each root is kept with the _fingerprint of all it looked at, and a copy of it
    is the answer while the fingerprint is the same. A reading that failed is not kept."""
    stamp = _fingerprint(root)
    kept = _LAST_READING.get(root)
    if stamp is not None and kept is not None and kept[0] == stamp:
        return _copy(kept[1])
    contents = _read_venv(root)
    _LAST_READING.pop(root, None)
    if stamp is not None:
        _LAST_READING[root] = (stamp, contents)
        while len(_LAST_READING) > _ROOTS_KEPT:
            del _LAST_READING[next(iter(_LAST_READING))]  # the root read least recently
    return _copy(contents)


def _read_venv(root: Path) -> VenvContents:
    config = read_pyvenv_cfg(root)
    if config is None:
        what = "does not exist" if not root.exists() else "is not a venv (no readable pyvenv.cfg)"
        raise BadInput(f"--venv {root} {what}")
    if "home" not in config or not venv_python(root).exists():
        raise BadInput(
            f"--venv {root} is not a working venv (pyvenv.cfg names no 'home', or bin/python is missing)",
            hint="audit a venv made by 'python -m venv' (or ascend-setup install)",
        )
    sites = site_packages(root)
    dists: List[Installed] = []
    damaged: List[Tuple[Path, str]] = []
    nameless: List[Path] = []
    for site in sites:
        for meta in sorted(site.iterdir()):
            if meta.suffix not in (".dist-info", ".egg-info") or not meta.is_dir():
                continue
            texts, broken = _read_members(meta)
            damaged += broken
            if any(path.name in ("METADATA", "PKG-INFO") for path, _ in broken):
                nameless.append(meta)
                continue  # no name or version can be trusted from it
            dist = _CheckedDistribution(meta, texts)
            headers = dist.metadata  # parsed once: importlib.metadata re-parses on every access
            name = headers["Name"] if headers else None
            if not name:
                nameless.append(meta)
                continue
            dists.append(
                Installed(
                    canonicalize_name(name),
                    headers["Version"] or "",
                    meta,
                    dist,
                    headers.get_all("Requires-Dist") or [],
                    texts,
                )
            )
    return VenvContents(root=root, config=config, site=sites, dists=dists, damaged=damaged, nameless=nameless)


#: (mode, inode, device, size, mtime, ctime) or None when absent: a rewrite of the same size, its mtime set back,
#: still moves st_ctime_ns, which no one can set.
_Stat = Optional[Tuple[int, int, int, int, int, int]]
_Fingerprint = Tuple[object, ...]

#: read_venv's last reading of each root, with its fingerprint; a process reads one venv, or a few.
_LAST_READING: Dict[Path, Tuple[_Fingerprint, VenvContents]] = {}
_ROOTS_KEPT = 4

#: The kernel stamps a change from a clock that moves once a tick (a jiffy, at most 10 ms; whole seconds on some
#: filesystems, taken to be those of a stamp of whole seconds), so a second change within the tick of the first can
#: leave the same stamps: a fingerprint with a stamp that recent is not trusted.
_TICK_NS = 20_000_000
_COARSE_TICK_NS = 2_000_000_000


def _stat(path: str, follow: bool) -> _Stat:
    try:
        st = os.stat(path, follow_symlinks=follow)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _fingerprint(root: Path) -> Optional[_Fingerprint]:
    """The stats of all read_venv reads (pyvenv.cfg, bin/python, each site-packages, the names and the folders of
    its dist-infos, their CHECKED_MEMBERS), taken as read_venv follows links or not. None when it cannot be
    trusted to change with them: a stat failed, or a stamp is within a tick of now."""
    now = time.time_ns()
    try:
        sites = site_packages(root)
        stats = [_stat(str(root / "pyvenv.cfg"), True), _stat(str(venv_python(root)), True)]
        names: List[Tuple[str, ...]] = []
        for site in sites:
            stats.append(_stat(str(site), True))
            metas = sorted(e.path for e in os.scandir(site) if e.name.endswith((".dist-info", ".egg-info")))
            names.append(tuple(metas))
            for meta in metas:
                stats.append(_stat(meta, True))
                stats += [_stat(f"{meta}/{m}", False) for m in CHECKED_MEMBERS]  # read without following
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop, to Path.resolve before Python 3.13
        return None
    for s in stats:
        if s is not None and s[5] >= now - (_COARSE_TICK_NS if s[5] % 1_000_000_000 == 0 else _TICK_NS):
            return None
    return tuple(sites), tuple(names), tuple(stats)


def _copy(contents: VenvContents) -> VenvContents:
    """The caller's own lists and Installed (the kept reading must stay as read); texts are read-only."""
    return replace(
        contents,
        config=dict(contents.config),
        site=list(contents.site),
        dists=[replace(d, requires=list(d.requires)) for d in contents.dists],
        damaged=list(contents.damaged),
        nameless=list(contents.nameless),
    )


#: The dist-info files the audit reads; each is checked before importlib.metadata parses it.
CHECKED_MEMBERS = ("METADATA", "PKG-INFO", "WHEEL", "RECORD", "INSTALLER", "direct_url.json")


def _read_members(meta: Path) -> Tuple[Mapping[str, str], List[Tuple[Path, str]]]:
    """(member -> text, the members that are not readable text: binary, a FIFO, huge) of one dist-info:
    damage is a finding, not a crash."""
    texts: Dict[str, str] = {}
    found = []
    for member in CHECKED_MEMBERS:
        path = meta / member
        if not (path.exists() or path.is_symlink()):
            continue
        try:
            texts[member] = read_input_text(path, "metadata", follow=False)  # pip writes no links in a dist-info
        except BadInput as exc:
            found.append((path, exc.message))
    return MappingProxyType(texts), found


class _CheckedDistribution(PathDistribution):
    """importlib.metadata's view of a dist-info, over the member texts read_venv checked: no member is read
    twice, and none unchecked."""

    def __init__(self, path: Path, texts: Mapping[str, str]) -> None:
        super().__init__(path)
        self._texts = texts

    def read_text(self, filename: Union[str, os.PathLike[str]]) -> Optional[str]:
        if isinstance(filename, str) and filename in CHECKED_MEMBERS:
            return self._texts.get(filename)
        return super().read_text(filename)


@dataclass(frozen=True)
class Unmet:
    """One requirement of an installed distribution that the venv does not meet."""

    name: str
    requirement: Requirement
    installed: Optional[str]

    @property
    def dependency(self) -> str:
        return canonicalize_name(self.requirement.name)

    def __str__(self) -> str:
        return f"{self.name} requires {self.requirement} (installed: {self.installed or 'none'})"


def requirements_unmet(
    contents: Optional[VenvContents], names: Iterable[str], within: Iterable[str], env: Mapping[str, str]
) -> List[Unmet]:
    """The requirements of the installed `names` on packages in `within` that the venv does not meet
    (torch-npu's `torch==2.10.0+cpu` against a plain torch 2.10.0, say). Local versions count."""
    if contents is None:
        return []
    dists = contents.by_name()
    scope = {canonicalize_name(n) for n in within}
    unmet = []
    for name in names:
        if name not in dists:
            continue
        for req in applicable(dists[name][0].requires, env):
            dep = canonicalize_name(req.name)
            if dep not in scope:
                continue
            have = dists.get(dep)
            version = have[0].parsed_version if have else None
            if version is None or not req.specifier.contains(version, prereleases=True):
                unmet.append(Unmet(name, req, have[0].version if have else None))
    return unmet
