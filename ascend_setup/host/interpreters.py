"""Python interpreters on this machine, so the venv can use one inside the row's range."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.host.os_hints import python_install_hint

_PROBE = (
    "import json, sys\n"
    "try:\n"
    "    import ensurepip, venv\n"
    "    ok = True\n"
    "except Exception:\n"
    "    ok = False\n"
    "print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3], 'venv': ok,"
    " 'executable': sys.executable}))\n"
)


@dataclass(frozen=True)
class Interpreter:
    path: str
    version: str
    has_venv: bool

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


_NAME = re.compile(r"^python3(\.\d{1,2})?$")
#: Where interpreters live on the hosts we serve, below the filesystem root.
ROOT_PATTERNS: Tuple[str, ...] = (
    "usr/local/bin/python3*",
    "usr/bin/python3*",
    "usr/local/python3*/bin/python3*",
    "opt/*/bin/python3*",
    "opt/*/*/bin/python3*",
    "opt/conda/envs/*/bin/python3*",
)
#: ... and below the user's home (pyenv, conda flavours, uv-managed interpreters).
HOME_PATTERNS: Tuple[str, ...] = (
    ".pyenv/versions/*/bin/python3*",
    "miniconda3/bin/python3*",
    "anaconda3/bin/python3*",
    "miniforge3/bin/python3*",
    "miniconda3/envs/*/bin/python3*",
    "anaconda3/envs/*/bin/python3*",
    "miniforge3/envs/*/bin/python3*",
    ".conda/envs/*/bin/python3*",
    ".local/share/uv/python/*/bin/python3*",
)


#: ... and below the prefixes these variables name.
ENV_PATTERNS = {
    "PYENV_ROOT": ("versions/*/bin/python3*",),
    "CONDA_PREFIX": ("bin/python3*", "envs/*/bin/python3*"),
    "UV_PYTHON_INSTALL_DIR": ("*/bin/python3*",),
}


def candidate_paths(
    extra: Iterable[str] = (), *, root: str = "/", home: Optional[str] = None, path_env: Optional[str] = None
) -> List[str]:
    """Every python3 / python3.X on PATH and in the usual prefixes (one per real file). `root`, `home`
    and `path_env` exist so that fake interpreter trees can stand in for a host in tests."""
    home = os.path.expanduser("~") if home is None else home
    found: List[str] = list(extra)
    for directory in (os.environ.get("PATH", "") if path_env is None else path_env).split(os.pathsep):
        if directory:
            found += sorted(glob.glob(os.path.join(directory, "python3*")))
    for base, patterns in ((root, ROOT_PATTERNS), (home, HOME_PATTERNS)):
        for pattern in patterns:
            found += sorted(glob.glob(os.path.join(base, pattern)))
    for var, patterns in ENV_PATTERNS.items():
        if os.environ.get(var):
            for pattern in patterns:
                found += sorted(glob.glob(os.path.join(os.environ[var], pattern)))
    unique: List[str] = []
    seen = set()
    for path in found:
        if path not in extra and not _NAME.match(os.path.basename(path)):
            continue
        real = os.path.realpath(path)
        if real not in seen and os.access(real, os.X_OK) and os.path.isfile(real):
            seen.add(real)
            unique.append(path)
    return unique


#: The interpreters a process has asked, by the identity of the file run (see probe); a few per host.
_ANSWERS: Dict[Tuple[str, Tuple[int, ...]], Interpreter] = {}


def probe(path: str, timeout: float = 15.0) -> Optional[Interpreter]:
    """Ask the interpreter itself for its version; None when it does not run. A working one is asked once a
    process for as long as the file it runs is the same: an install's preflight, choice and venv step each
    ask (~50 ms an interpreter start)."""
    try:
        st = os.stat(path)  # through the link, as it is run: a retargeted or replaced interpreter is asked again
    except OSError:
        return None
    key = (path, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size))
    if key in _ANSWERS:
        return _ANSWERS[key]
    try:
        out = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=timeout)
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    _ANSWERS[key] = Interpreter(path=path, version=data["version"], has_venv=bool(data["venv"]))
    return _ANSWERS[key]


def find_interpreters(extra: Iterable[str] = (), **where: str) -> List[Interpreter]:
    paths = candidate_paths(extra, **where)
    with ThreadPoolExecutor(max_workers=8) as pool:
        return [i for i in pool.map(probe, paths) if i is not None]


#: The version hints suggest: every binary package of the current rows publishes cp311 wheels.
PREFERRED = "3.11"


def _legacy_version(path: str) -> Optional[str]:
    """The version of an interpreter too old to run the probe (Python 2 prints it on stderr)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"Python (\d+\.\d+(?:\.\d+)?)", (out.stdout + out.stderr).strip())
    return match.group(1) if match else None


def choose_interpreter(
    spec: str, explicit: Optional[str] = None, found: Optional[List[Interpreter]] = None
) -> Interpreter:
    """The interpreter the venv will use: `explicit` (--python) if given, else the newest one inside `spec`.
    An error about `explicit` names the value only; the caller adds where it was given (BadInput.given_as)."""
    allowed = SpecifierSet(spec)
    if explicit:
        interp = probe(explicit)
        if interp is None:
            old = _legacy_version(explicit)
            if old:
                raise BadInput(
                    f"{explicit} is Python {old}, too old: the row needs {spec}", hint=python_install_hint(PREFERRED)
                )
            raise BadInput(f"{explicit} is not a working Python interpreter")
        if not allowed.contains(interp.version):
            raise BadInput(
                f"{explicit} is Python {interp.version}, outside the row's range {spec}",
                hint=python_install_hint(PREFERRED),
            )
        if not interp.has_venv:
            raise BadInput(f"{explicit} cannot create venvs (no ensurepip)", hint=python_install_hint(interp.minor))
        return interp
    found = find_interpreters() if found is None else found
    fitting = [i for i in found if allowed.contains(i.version) and i.has_venv]
    if not fitting:
        seen = ", ".join(sorted({i.version for i in found})) or "none"
        raise AscendSetupError(
            f"no Python interpreter in {spec} with venv support was found (seen: {seen})",
            hint=f"{python_install_hint(PREFERRED)}; then pass --python /path/to/python{PREFERRED}",
        )
    return max(fitting, key=lambda i: Version(i.version))
