"""The vllm-ascend source build: fetch once, extract once, build in place, keep the wheel."""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from pathlib import Path
from typing import Callable, Dict, List, Optional

from ascend_setup.errors import AscendSetupError

GIB = 1024 ** 3
EXTRACTED_MARK = ".ascend-setup-extracted"
STAGE = re.compile(r"\[(\d+)/(\d+)\]")


def wheelhouse_key(*, version: str, cann: str, arch: str, python: str, glibc: str, soc: str) -> str:
    """What a built wheel depends on; a match means the 40-minute build can be skipped."""
    return f"vllm_ascend-{version}-cann{cann}-{arch}-py{python}-glibc{glibc}-{soc}"


def cached_wheel(wheelhouse: Path, key: str) -> Optional[Path]:
    wheels = sorted((wheelhouse / key).glob("*.whl"))
    return wheels[0] if wheels else None


def max_jobs(cpus: int, mem_total: int, gib_per_job: int = 4) -> int:
    """Parallel compile jobs the machine can feed: cores, and about 4 GiB of memory per job."""
    return max(1, min(cpus, mem_total // (gib_per_job * GIB) if mem_total else cpus))


def extract_once(sdist: Path, src_root: Path) -> Path:
    """Unpack into a temp dir of ours, mark it complete, then rename: the tree appears whole or not at all."""
    base = sdist.name[: -len(".tar.gz")] if sdist.name.endswith(".tar.gz") else sdist.stem
    final = src_root / base
    if (final / EXTRACTED_MARK).exists():
        return final
    if final.exists():
        raise AscendSetupError(f"{final} exists but was not unpacked by ascend-setup",
                               hint="move it away; ascend-setup never deletes what it did not create")
    staging = src_root / f".extracting-{base}"
    if staging.exists():
        shutil.rmtree(staging)  # our own half-finished extraction from a killed run
    staging.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if _safe(m, staging)]
        if hasattr(tarfile, "data_filter"):
            archive.extractall(staging, members=members, filter="data")
        else:
            archive.extractall(staging, members=members)
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


def _safe(member: tarfile.TarInfo, root: Path) -> bool:
    target = (root / member.name).resolve()
    return str(target).startswith(str(root.resolve()) + os.sep) and not member.issym() and not member.islnk()


def build_env(base: Dict[str, str], *, soc: str, jobs: int, ascend_home: Optional[str]) -> Dict[str, str]:
    env = dict(base)
    env["SOC_VERSION"] = soc
    env["MAX_JOBS"] = str(jobs)
    env.setdefault("COMPILE_CUSTOM_KERNELS", "1")
    env.setdefault("CMAKE_BUILD_TYPE", "Release")
    if ascend_home:
        env.setdefault("ASCEND_HOME_PATH", ascend_home)
    return env


def stage_watcher(update: Callable[[int, int], None]) -> Callable[[str], None]:
    """A line hook that turns ninja-style `[n/m]` lines into progress updates."""

    def on_line(line: str) -> None:
        match = STAGE.search(line)
        if match:
            update(int(match.group(1)), int(match.group(2)))

    return on_line


def list_wheels(directory: Path) -> List[Path]:
    return sorted(directory.glob("*.whl")) if directory.is_dir() else []
