"""What several steps share: the row, the venv's interpreter, indexes, installer, CANN env, the lock."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from packaging.version import InvalidVersion, Version

from ascend_setup.audit.venv import VenvContents, read_venv, requirements_unmet
from ascend_setup.deps.derive import target_environment
from ascend_setup.errors import BadInput
from ascend_setup.host.setenv import capture_env
from ascend_setup.soc import device_of
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.tags import Target
from ascend_setup.installers import Indexes, Installer, get_installer
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.paths import cache_dir
from ascend_setup.resolve.lockfile import Lock, read_lock
from ascend_setup.steps.base import Context
from ascend_setup.venvinfo import read_pyvenv_cfg, venv_python

#: Their own requirements are not honoured on purpose (vllm's CUDA pins); every other row package's are.
REQUIREMENTS_WAIVED = {"vllm"}


def row_of(ctx: Context) -> Row:
    return ctx.extras["row"]


def matrix_of(ctx: Context) -> Matrix:
    return ctx.extras["matrix"]


def settings_of(ctx: Context) -> PipSettings:
    return ctx.extras["pip_settings"]


def venv_dir(ctx: Context) -> Path:
    return Path(ctx.options["venv"])


def python_of(ctx: Context) -> Path:
    return venv_python(venv_dir(ctx))


def indexes_of(ctx: Context) -> Indexes:
    """The mirror step's choice (recorded in state, so a resumed run uses the same index)."""
    out = ctx.outputs.get("mirror") or {}
    return Indexes(out.get("index_url", ""), tuple(out.get("extra_index_urls", ())))


def host_target(ctx: Context) -> Target:
    pre = ctx.outputs["preflight"]
    return Target(glibc=pre["glibc"] or "2.17", arch=pre["arch"], python=".".join(pre["python_version"].split(".")[:2]))


def host_soc(ctx: Context) -> Optional[str]:
    """The SOC_VERSION this install builds for: --soc's, else npu-smi's (preflight's); None when unknown."""
    return ctx.options.get("soc") or (ctx.outputs.get("preflight") or {}).get("soc")


def host_device(ctx: Context) -> Optional[str]:
    """The NPU device type this install builds for (A2, A3, ...), from `host_soc`."""
    return device_of(host_soc(ctx))


def installer_of(ctx: Context, name: Optional[str] = None) -> Installer:
    """The run's installer (`--installer`), or the one named."""
    return get_installer(name or ctx.options.get("installer", "pip"), settings_of(ctx), cache_dir() / "uv")


def lock_of(ctx: Context) -> Optional[Lock]:
    """The lock the resolve step wrote (None before it ran)."""
    path = (ctx.outputs.get("resolve") or {}).get("lock")
    if not path or not Path(path).is_file():
        return None
    cached = ctx.extras.get("lock")
    if cached is None or ctx.extras.get("lock_path") != path:
        cached = ctx.extras["lock"] = read_lock(Path(path))
        ctx.extras["lock_path"] = path
    return cached


def cann_env(ctx: Context) -> Dict[str, str]:
    """os.environ plus what CANN's (and NNAL's) set_env.sh export, captured once per run."""
    if "cann_env" not in ctx.extras:
        scripts = [Path(p) for p in ctx.outputs.get("preflight", {}).get("set_env", [])]
        ctx.extras["cann_env"] = capture_env(scripts).apply() if scripts else None
    env = ctx.extras["cann_env"]
    return dict(os.environ) if env is None else dict(env)


def venv_contents(ctx: Context) -> Optional[VenvContents]:
    if read_pyvenv_cfg(venv_dir(ctx)) is None:
        return None
    try:
        return read_venv(venv_dir(ctx))
    except BadInput:
        return None


def installed_versions(ctx: Context) -> Dict[str, str]:
    """name -> version of every distribution in the venv (read from dist-info, no subprocess)."""
    contents = venv_contents(ctx)
    return {d.name: d.version for d in contents.dists} if contents else {}


def same_version(have: Optional[str], want: Optional[str]) -> bool:
    """Exact equality, local version included: 2.10.0 is not 2.10.0+cpu."""
    try:
        return have is not None and want is not None and Version(have) == Version(want)
    except InvalidVersion:
        return have == want


def local_only_differs(have: Optional[str], want: Optional[str]) -> bool:
    """2.10.0 installed where 2.10.0+cpu is locked (or the reverse): pip would call it satisfied."""
    try:
        return have is not None and want is not None and Version(have).public == Version(want).public \
            and Version(have) != Version(want)
    except InvalidVersion:
        return False


def row_requirements_unmet(ctx: Context, names: Iterable[str]) -> List[str]:
    """The row packages' own requirements on each other that the venv does not meet (vllm's are waived)."""
    env = target_environment(host_target(ctx))
    wanted = [n for n in names if n not in REQUIREMENTS_WAIVED]
    return [str(u) for u in requirements_unmet(venv_contents(ctx), wanted, row_of(ctx).packages, env)]
