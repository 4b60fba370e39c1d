"""Machine facts: glibc, architecture, OS, usable CPUs, memory, disk."""

from __future__ import annotations

import os
import platform
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from ascend_setup.index.tags import Target
from ascend_setup.utils.osrelease import os_release
from ascend_setup.utils.paths import is_persistent


def glibc_version() -> Optional[str]:
    """glibc version from the C library itself (confstr), e.g. '2.31'; None on musl and others."""
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        value = None
    if value and value.startswith("glibc "):
        return value.split()[1]
    name, version = platform.libc_ver()
    return version if name == "glibc" and version else None


#: The glibc a host whose glibc cannot be read is taken to have: manylinux2014's, the oldest any wheel targets.
GLIBC_FLOOR = "2.17"


def this_machine(python: str) -> Target:
    """This machine as a wheel target, with the Python (X.Y) the install uses; GLIBC_FLOOR where none is known."""
    return Target(glibc=glibc_version() or GLIBC_FLOOR, arch=platform.machine(), python=python)


def usable_cpus() -> int:
    """CPUs this process may run on (affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> Dict[str, int]:
    """MemTotal and MemAvailable in bytes (empty when /proc is not there)."""
    found: Dict[str, int] = {}
    try:
        for line in meminfo.read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found


def free_disk_bytes(path: Path) -> int:
    """Free bytes on the filesystem that holds `path` (or its nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


@dataclass
class MachineFacts:
    glibc: Optional[str]
    arch: str
    os_id: str
    os_version: str
    os_name: str
    cpus: int
    mem_total: int
    mem_available: int
    workdir: str
    workdir_free: int
    workdir_persistent: bool

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def machine_facts(workdir: Path) -> MachineFacts:
    release = os_release()
    mem = memory_bytes()
    return MachineFacts(
        glibc=glibc_version(),
        arch=platform.machine(),
        os_id=release.get("ID", platform.system().lower()),
        os_version=release.get("VERSION_ID", ""),
        os_name=release.get("PRETTY_NAME", platform.platform()),
        cpus=usable_cpus(),
        mem_total=mem.get("MemTotal", 0),
        mem_available=mem.get("MemAvailable", 0),
        workdir=str(workdir),
        workdir_free=free_disk_bytes(workdir),
        workdir_persistent=is_persistent(workdir),
    )
