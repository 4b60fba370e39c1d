"""Python interpreters on this machine, so the venv can use one inside the row's range."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Iterable, List, Optional

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ascend_setup.errors import AscendSetupError, BadInput

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

    def to_json(self) -> dict:
        return asdict(self)


def candidate_paths(extra: Iterable[str] = ()) -> List[str]:
    """python3* on PATH plus the usual pyenv and conda places."""
    names = ["python3"] + [f"python3.{m}" for m in range(8, 15)]
    found: List[str] = list(extra)
    for name in names:
        hit = shutil.which(name)
        if hit:
            found.append(hit)
    home = os.path.expanduser("~")
    patterns = [
        f"{home}/.pyenv/versions/*/bin/python3",
        f"{home}/miniconda3/bin/python3", f"{home}/anaconda3/bin/python3",
        f"{home}/miniconda3/envs/*/bin/python3", f"{home}/anaconda3/envs/*/bin/python3",
        "/opt/conda/bin/python3", "/opt/conda/envs/*/bin/python3",
        "/usr/local/bin/python3.*", "/usr/bin/python3.*",
    ]
    for pattern in patterns:
        found.extend(p for p in sorted(glob.glob(pattern)) if not p.endswith("-config"))
    unique: List[str] = []
    seen = set()
    for path in found:
        real = os.path.realpath(path)
        if real not in seen and os.access(real, os.X_OK) and os.path.isfile(real):
            seen.add(real)
            unique.append(path)
    return unique


def probe(path: str, timeout: float = 15.0) -> Optional[Interpreter]:
    """Ask the interpreter itself for its version; None when it does not run."""
    try:
        out = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=timeout)
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return Interpreter(path=path, version=data["version"], has_venv=bool(data["venv"]))


def find_interpreters(extra: Iterable[str] = ()) -> List[Interpreter]:
    paths = candidate_paths(extra)
    with ThreadPoolExecutor(max_workers=8) as pool:
        return [i for i in pool.map(probe, paths) if i is not None]


def choose_interpreter(spec: str, explicit: Optional[str] = None,
                       found: Optional[List[Interpreter]] = None) -> Interpreter:
    """The interpreter the venv will use: --python if given, else the newest one inside `spec`."""
    allowed = SpecifierSet(spec)
    if explicit:
        interp = probe(explicit)
        if interp is None:
            raise BadInput(f"--python {explicit} is not a working Python interpreter")
        if not allowed.contains(interp.version):
            raise BadInput(f"--python {explicit} is Python {interp.version}, outside the row's range {spec}")
        if not interp.has_venv:
            raise BadInput(f"--python {explicit} cannot create venvs (no ensurepip)",
                           hint=f"apt-get install python{interp.minor}-venv")
        return interp
    found = find_interpreters() if found is None else found
    fitting = [i for i in found if allowed.contains(i.version) and i.has_venv]
    if not fitting:
        seen = ", ".join(sorted({i.version for i in found})) or "none"
        raise AscendSetupError(
            f"no Python interpreter in {spec} with venv support was found (seen: {seen})",
            hint="install one (e.g. 'apt-get install python3.11 python3.11-venv', or pyenv/conda) "
                 "and pass --python /path/to/python3.11")
    return max(fitting, key=lambda i: Version(i.version))
