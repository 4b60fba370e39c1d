"""The vllm-ascend source build: fetch once, extract once, build in place, keep the wheel."""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional

from ascend_setup.errors import AscendSetupError

EXTRACTED_MARK = ".ascend-setup-extracted"
#: Ninja's `[n/m]` and CMake's Makefile generator's `[ NN%]` (the top-level build uses Makefiles).
STAGE = re.compile(r"\[\s*(\d+)/(\d+)\]")
PERCENT = re.compile(r"^\[\s*(\d{1,3})%\]")


def wheelhouse_key(*, version: str, cann: str, arch: str, python: str, glibc: str, soc: str) -> str:
    """What a built wheel depends on; a match means the 40-minute build can be skipped."""
    return f"vllm_ascend-{version}-cann{cann}-{arch}-py{python}-glibc{glibc}-{soc}"


def cached_wheel(wheelhouse: Path, key: str) -> Optional[Path]:
    wheels = sorted((wheelhouse / key).glob("*.whl"))
    return wheels[0] if wheels else None


def extract_once(sdist: Path, src_root: Path) -> Path:
    """Unpack into a temp dir of ours, mark it complete, then rename: the tree appears whole or not at all."""
    base = sdist.name[: -len(".tar.gz")] if sdist.name.endswith(".tar.gz") else sdist.stem
    final = src_root / base
    if (final / EXTRACTED_MARK).exists():
        return final
    if final.exists():
        raise AscendSetupError(
            f"{final} exists but was not unpacked by ascend-setup",
            hint="move it away; ascend-setup never deletes what it did not create",
        )
    staging = src_root / f".extracting-{base}"
    if staging.exists():
        shutil.rmtree(staging)  # our own half-finished extraction from a killed run
    staging.mkdir(parents=True)
    extract_tar(sdist, staging)
    top = staging / base
    if not top.is_dir():
        dirs = [p for p in staging.iterdir() if p.is_dir()]
        if len(dirs) != 1:
            raise AscendSetupError(f"{sdist.name} does not unpack into one directory")
        top = dirs[0]
    (top / EXTRACTED_MARK).write_text(sdist.name + "\n")
    os.replace(top, final)
    shutil.rmtree(staging)
    return final


def extract_tar(path: Path, staging: Path) -> None:
    """Unpack a tar archive into `staging`, leaving out any member that would land outside it (and, where
    Python has it, through the `data` filter: no devices, no absolute links)."""
    with tarfile.open(path) as archive:
        members = [m for m in archive.getmembers() if _safe(m, staging)]
        if hasattr(tarfile, "data_filter"):
            archive.extractall(staging, members=members, filter="data")
        else:
            archive.extractall(staging, members=members)


def _safe(member: tarfile.TarInfo, root: Path) -> bool:
    target = (root / member.name).resolve()
    return str(target).startswith(str(root.resolve()) + os.sep) and not member.issym() and not member.islnk()


#: Host Python settings that would put another interpreter's packages (or pip's configuration) into the build.
HOST_PYTHON_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_PREFIX")


@dataclass(frozen=True)
class BuildEnv:
    env: Dict[str, str]
    notes: List[str]


def build_env(
    base: Dict[str, str],
    *,
    host: Mapping[str, str],
    venv: Path,
    soc: str,
    jobs: int,
    ascend_home: Optional[str],
    home: Path,
) -> BuildEnv:
    """The build's environment: `base` (the host's plus CANN's set_env.sh) made to run in the venv.

    vllm-ascend's setup.py calls `python3`, `cmake` and `python3 -m pip show torch-npu` through PATH, and
    the operator compiler's Python is `python3` unless ASCEND_PYTHON_EXECUTABLE says otherwise: so
    `<venv>/bin` goes first. PYTHONPATH keeps only what CANN's scripts added (its tbe packages), none of
    the host's; pip's and Python's other host settings go. HOME is ours: build_aclnn.sh writes ~/.gitconfig.
    """
    env = {k: v for k, v in base.items() if k not in HOST_PYTHON_VARS and not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # as for every pip run of ours: no pip.conf constraint reaches the build
    notes = []
    bindir = str(venv / "bin")
    env["PATH"] = os.pathsep.join([bindir, *(p for p in base.get("PATH", "").split(os.pathsep) if p and p != bindir)])
    host_paths = set(filter(None, host.get("PYTHONPATH", "").split(os.pathsep)))
    cann_paths = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p and p not in host_paths]
    if cann_paths:
        env["PYTHONPATH"] = os.pathsep.join(cann_paths)
    if host_paths:
        notes.append(f"the host's PYTHONPATH ({os.pathsep.join(sorted(host_paths))}) is left out of the build")
    env["VIRTUAL_ENV"] = str(venv)
    env["ASCEND_PYTHON_EXECUTABLE"] = str(venv / "bin" / "python3")
    env["HOME"] = str(home)
    env["SOC_VERSION"] = soc
    env["MAX_JOBS"] = str(jobs)
    if base.get("COMPILE_CUSTOM_KERNELS", "1") != "1":
        notes.append(
            f"COMPILE_CUSTOM_KERNELS={base['COMPILE_CUSTOM_KERNELS']} in the environment is overridden "
            "with 1: without it the build makes a wheel with no custom kernels"
        )
    env["COMPILE_CUSTOM_KERNELS"] = "1"
    env.setdefault("CMAKE_BUILD_TYPE", "Release")
    if ascend_home:
        env.setdefault("ASCEND_HOME_PATH", ascend_home)
    return BuildEnv(env, notes)


def stage_watcher(update: Callable[[int, int], None]) -> Callable[[str], None]:
    """A line hook that turns Ninja's `[n/m]` and Makefiles' `[ NN%]` lines into progress updates."""

    def on_line(line: str) -> None:
        match = STAGE.search(line)
        if match:
            update(int(match.group(1)), int(match.group(2)))
            return
        match = PERCENT.match(line.lstrip())
        if match:
            update(int(match.group(1)), 100)

    return on_line


def list_wheels(directory: Path) -> List[Path]:
    return sorted(directory.glob("*.whl")) if directory.is_dir() else []
