"""Find CANN (toolkit, NNAL, driver, kernels) across the layouts that exist in the field."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from ascend_setup.errors import BadInput
from ascend_setup.matrix.load import select_row
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.utils.inputs import read_host_text

DEFAULT_ROOTS = ("/usr/local/Ascend",)
CANN_HOME_ENV = ("ASCEND_SETUP_CANN_HOME",)
CANN_VAR_ENV = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")


@dataclass
class Nnal:
    set_env: Optional[str]
    libatb: Optional[str]


@dataclass
class Driver:
    root: str
    version: Optional[str]
    package_version: Optional[str]


@dataclass
class CannInstall:
    """One CANN toolkit found on disk and what belongs to it."""

    root: str
    toolkit: str
    layout: str
    version: Optional[str]
    version_source: Optional[str]
    set_env: Optional[str]
    nnal: Optional[Nnal] = None
    driver: Optional[Driver] = None
    kernels: List[str] = field(default_factory=list)

    def set_env_scripts(self) -> List[Path]:
        """The scripts to source, in order: the toolkit's, then NNAL's."""
        scripts = [Path(self.set_env)] if self.set_env else []
        if self.nnal and self.nnal.set_env:
            scripts.append(Path(self.nnal.set_env))
        return scripts

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def read_key_values(path: Path) -> Dict[str, str]:
    """`key=value` lines (version.info, install.info, version.cfg) read through the gate: a missing or
    unreadable file gives {}; a FIFO, a device or a file past 1 MiB is bad input naming it."""
    result: Dict[str, str] = {}
    text = read_host_text(path, "host-info")
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            result[key.strip()] = value.strip().strip('"')
    return result


def same_cann(a: Optional[str], b: Optional[str]) -> bool:
    """CANN versions as written by its installers ('9.2.0-beta.2', '8.0.RC1') compared by meaning."""
    if a is None or b is None:
        return False
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a.strip().lower() == b.strip().lower()


def _toolkit_version(toolkit: Path, arch: str) -> Tuple[Optional[str], Optional[str]]:
    """(version, file it came from) from install.info (9.x and 8.x), else version.cfg (older 8.x)."""
    candidates = [toolkit / f"{arch}-linux" / "ascend_toolkit_install.info"]
    candidates += sorted(toolkit.glob("*-linux/ascend_toolkit_install.info"))
    for info in candidates:
        value = read_key_values(info).get("version")
        if value:
            return value.strip(), str(info)
    cfg = toolkit / "version.cfg"
    running = read_key_values(cfg).get("toolkit_running_version", "")
    match = re.match(r"\[([^:\]]*):([^\]]*)\]", running)
    if match:
        return (match.group(2) or match.group(1)).strip(), str(cfg)
    return None, None


def _find_root(start: Path) -> Path:
    """Walk up from a toolkit dir (ASCEND_HOME_PATH style) to the Ascend root that holds it."""
    for candidate in [start, *start.parents]:
        if (candidate / "ascend-toolkit").exists() or (candidate / "cann").exists() or any(candidate.glob("cann-*")):
            return candidate
        if candidate.parent == candidate:
            break
    return start


def _toolkits(root: Path) -> List[Tuple[str, Path, Optional[Path]]]:
    """(layout, toolkit dir, set_env.sh) for every toolkit layout present under `root`."""
    found: List[Tuple[str, Path, Optional[Path]]] = []
    cann = root / "cann"
    if (cann / "set_env.sh").exists():
        found.append(("9.x cann-<ver>", cann.resolve(), cann / "set_env.sh"))
    for versioned in sorted(root.glob("cann-*")):
        if versioned.is_dir() and not any(versioned.resolve() == f[1] for f in found):
            script = versioned / "set_env.sh"
            found.append(("9.x cann-<ver>", versioned.resolve(), script if script.exists() else None))
    toolkit = root / "ascend-toolkit"
    if toolkit.is_dir():
        latest = toolkit / "latest"
        target = latest.resolve() if latest.exists() else None
        if target is None:
            versions = sorted((p for p in toolkit.iterdir() if p.is_dir()), key=lambda p: p.name)
            target = versions[-1].resolve() if versions else None
        if target is not None and not any(target == f[1] for f in found):
            script = toolkit / "set_env.sh"
            found.append(("8.x ascend-toolkit", target, script if script.exists() else None))
    return found


def _nnal(root: Path) -> Optional[Nnal]:
    atb = root / "nnal" / "atb"
    if not atb.exists():
        return None
    script = atb / "set_env.sh"
    libs = sorted(atb.rglob("libatb.so"))
    return Nnal(set_env=str(script) if script.exists() else None, libatb=str(libs[0]) if libs else None)


def find_driver(root: Optional[Path]) -> Optional[Driver]:
    """The NPU driver: next to the CANN root, else the standard place."""
    bases = ([root / "driver"] if root else []) + [Path("/usr/local/Ascend/driver")]
    for base in bases:
        info = base / "version.info"
        if info.exists():
            values = read_key_values(info)
            return Driver(root=str(base), version=values.get("Version"), package_version=values.get("package_version"))
    return None


def _kernels(toolkit: Path) -> List[str]:
    """SoC families whose prebuilt operator kernels (the ops/kernels package) are installed."""
    kernel_dir = toolkit / "opp" / "built-in" / "op_impl" / "ai_core" / "tbe" / "kernel"
    try:
        return sorted(p.name for p in kernel_dir.iterdir() if p.is_dir() and p.name.startswith("ascend"))
    except OSError:
        return []


def candidate_roots(cann_home: Optional[str] = None) -> List[Path]:
    """Where to look, most specific first: --cann-home, then the env vars, then the usual places."""
    if cann_home:
        return [Path(cann_home)]
    roots: List[Path] = []
    for var in CANN_HOME_ENV:
        if os.environ.get(var):
            return [Path(os.environ[var])]
    for var in CANN_VAR_ENV:
        if os.environ.get(var):
            roots.append(_find_root(Path(os.environ[var])))
    roots += [Path(r) for r in DEFAULT_ROOTS]
    roots += sorted(Path("/home").glob("*/Ascend"))
    home = os.environ.get("HOME")
    if home:
        roots.append(Path(home) / "Ascend")
    unique: List[Path] = []
    for r in roots:
        if r not in unique:
            unique.append(r)
    return unique


def detect_cann(cann_home: Optional[str] = None, arch: Optional[str] = None) -> List[CannInstall]:
    """Every toolkit found, newest layout first. An explicit --cann-home that is not there is bad input."""
    arch = arch or platform.machine()
    if cann_home and not Path(cann_home).is_dir():
        raise BadInput(f"--cann-home {cann_home} is not a directory")
    installs: List[CannInstall] = []
    for start in candidate_roots(cann_home):
        if not start.is_dir():
            continue
        root = _find_root(start)
        for layout, toolkit, script in _toolkits(root):
            version, source = _toolkit_version(toolkit, arch)
            installs.append(
                CannInstall(
                    root=str(root),
                    toolkit=str(toolkit),
                    layout=layout,
                    version=version,
                    version_source=source,
                    set_env=str(script) if script else None,
                    nnal=_nnal(root),
                    driver=find_driver(root),
                    kernels=_kernels(toolkit),
                )
            )
        if installs:
            break
    return installs


def primary_cann(cann_home: Optional[str] = None, arch: Optional[str] = None) -> Optional[CannInstall]:
    """The toolkit a build would use (the one set_env.sh activates); None when there is no CANN."""
    installs = detect_cann(cann_home, arch)
    return installs[0] if installs else None


def row_for(matrix: Matrix, cann: Optional[str], installed: Optional[CannInstall]) -> Row:
    """The requested row, else the installed CANN's row, else the newest."""
    if cann:
        return select_row(matrix, cann)
    for version, row in matrix.rows.items():
        if installed and same_cann(installed.version, version):
            return row
    return matrix.newest()
