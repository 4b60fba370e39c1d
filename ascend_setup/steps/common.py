"""What several steps read of the venv: its distributions, and whether they are the locked versions."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from ascend_setup.dists.installed import VenvContents, read_venv, requirements_unmet
from ascend_setup.dists.venv_reader import read_pyvenv_cfg
from ascend_setup.errors import BadInput
from ascend_setup.resolve.requirement_set import target_environment
from ascend_setup.steps.install_session import InstallSession

#: Their own requirements are not honoured on purpose (vllm's CUDA pins); every other row package's are.
REQUIREMENTS_WAIVED = {"vllm"}


def venv_contents(session: InstallSession) -> Optional[VenvContents]:
    if read_pyvenv_cfg(session.venv) is None:
        return None
    try:
        return read_venv(session.venv)
    except BadInput:
        return None


def installed_versions(session: InstallSession) -> Dict[str, str]:
    """name -> version of every distribution in the venv (read from dist-info, no subprocess)."""
    return versions_in(venv_contents(session))


def versions_in(contents: Optional[VenvContents]) -> Dict[str, str]:
    """name -> version of every distribution a venv reading found (a dist-info it could not name is in none)."""
    return {d.name: d.version for d in contents.dists} if contents else {}


def row_requirements_unmet(
    session: InstallSession, names: Iterable[str], contents: Optional[VenvContents]
) -> List[str]:
    """The row packages' own requirements on each other that the venv (as `contents` read it) does not meet
    (vllm's are waived)."""
    assert session.row is not None
    env = target_environment(session.target)
    wanted = [n for n in names if n not in REQUIREMENTS_WAIVED]
    return [str(u) for u in requirements_unmet(contents, wanted, session.row.packages, env)]
