"""What several steps share: the row, the venv's interpreter, indexes, installer, CANN env, versions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ascend_setup.audit.venv import read_venv
from ascend_setup.errors import BadInput
from ascend_setup.fsutil import atomic_write_text
from ascend_setup.host.setenv import capture_env
from ascend_setup.installers import Indexes, Installer, get_installer
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.steps.base import Context
from ascend_setup.venvinfo import read_pyvenv_cfg, venv_python


def row_of(ctx: Context) -> Row:
    return ctx.extras["row"]


def matrix_of(ctx: Context) -> Matrix:
    return ctx.extras["matrix"]


def venv_dir(ctx: Context) -> Path:
    return Path(ctx.options["venv"])


def python_of(ctx: Context) -> Path:
    return venv_python(venv_dir(ctx))


def indexes_of(ctx: Context) -> Indexes:
    """The mirror step's choice (recorded in state, so a resumed run uses the same index)."""
    out = ctx.outputs.get("mirror") or {}
    return Indexes(out.get("index_url", ""), tuple(out.get("extra_index_urls", ())))


def installer_of(ctx: Context) -> Installer:
    return get_installer(ctx.options.get("installer", "pip"))


def cann_env(ctx: Context) -> Dict[str, str]:
    """os.environ plus what CANN's (and NNAL's) set_env.sh export, captured once per run."""
    if "cann_env" not in ctx.extras:
        scripts = [Path(p) for p in ctx.outputs.get("preflight", {}).get("set_env", [])]
        ctx.extras["cann_env"] = capture_env(scripts).apply() if scripts else None
    env = ctx.extras["cann_env"]
    return dict(os.environ) if env is None else dict(env)


def installed_versions(ctx: Context) -> Dict[str, str]:
    """name -> version of every distribution in the venv (read from dist-info, no subprocess)."""
    if read_pyvenv_cfg(venv_dir(ctx)) is None:
        return {}
    try:
        return {d.name: d.version for d in read_venv(venv_dir(ctx)).dists}
    except BadInput:
        return {}


def satisfied(installed: Mapping[str, str], requirements: Mapping[str, str]) -> List[str]:
    """The requirements (name -> specifier text) that the installed versions do not meet."""
    unmet = []
    for name, spec in requirements.items():
        have = installed.get(canonicalize_name(name))
        try:
            ok = have is not None and SpecifierSet(spec).contains(Version(have), prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            unmet.append(f"{name}{spec} (installed: {have or 'none'})")
    return unmet


def pins(row: Row, names: List[str]) -> Dict[str, str]:
    return {n: f"=={row.packages[n]}" for n in names}


def write_lines(path: Path, lines: List[str]) -> Path:
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
