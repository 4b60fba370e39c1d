"""What `mirrors` asks of the ranking: its flags checked together, the Python whose files measure the mirrors,
and the choice written where --apply says."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

from ascend_setup.dists.venv_reader import read_pyvenv_cfg
from ascend_setup.errors import BadInput
from ascend_setup.host.interpreters import PREFERRED
from ascend_setup.matrix.models import Row
from ascend_setup.mirrors.apply import write_user_config, write_venv_config
from ascend_setup.resolve.pythons import explicit_python


def checked_flags(*, apply: bool, venv: Optional[str], user: bool, only: bool, candidates: List[str]) -> Optional[Path]:
    """The venv --apply writes (as every path flag: `--venv=~/v` too), once --apply, --venv, --global, --only
    and --candidate are found to make sense together: the other ways are bad input, said before anything is
    measured."""
    if apply and not venv and not user:
        raise BadInput("--apply needs --venv DIR (or --global to change your user pip config)")
    if user and not apply:
        raise BadInput("--global does nothing without --apply", hint="add --apply to write your user pip config")
    if user and venv:
        raise BadInput(
            "--global and --venv name two different pip configurations: give one of them",
            hint="--venv DIR writes that venv's pip.conf/uv.toml; --global your user pip config",
        )
    if venv and not apply:
        raise BadInput("--venv does nothing without --apply", hint="add --apply to write that venv's pip.conf")
    path = Path(venv).expanduser() if venv else None
    if path and read_pyvenv_cfg(path) is None:
        raise BadInput(f"--venv {venv} is not a venv (no pyvenv.cfg)")
    if only and not candidates:
        raise BadInput("--only ranks just the --candidate URLs: give at least one")
    return path


def sample_python(value: Optional[str], row: Row) -> str:
    """The Python X.Y whose files measure the mirrors: --python (a version or an interpreter), else this one
    when the row takes it, else the version the hints suggest. Not the install's choice (decide_python): any file
    of the row measures a mirror as well, and that choice searches the host's interpreters (a probe each: 6 s on a
    loaded host, more than the default --budget) and asks the indexes first."""
    if value:
        return explicit_python(value, row)
    here = "%d.%d" % sys.version_info[:2]
    return here if row.python_allows(here + ".0") else PREFERRED


def apply_choice(chosen: str, venv: Optional[Path], venv_flag: Optional[str], user: bool) -> None:
    """Write the chosen index into the venv's pip.conf/uv.toml (its extra indexes stay), or the user's."""
    if venv:
        try:
            write_venv_config(venv, chosen, None)
        except OSError as exc:
            raise BadInput(f"--venv {venv_flag}: its pip.conf cannot be written ({exc.strerror or exc})") from None
    if user:
        write_user_config(chosen)
