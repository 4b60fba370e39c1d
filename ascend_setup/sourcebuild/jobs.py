"""MAX_JOBS for the vllm-ascend build from the memory it can really use, not the machine's total.

Compiler OOM (`cc1plus` killed) is a top upstream complaint: a container sees the host's MemTotal while
its cgroup allows a fraction of it, and a busy host has far less available than installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ascend_setup.host.machine import memory_bytes, usable_cpus

GIB = 1024**3

#: Memory one compile job may take at its peak. vllm-ascend's C++ (torch_binding.cpp and friends) includes
#: ATen and torch_npu headers; one cc1plus on such a file peaks near 2.5-3 GiB at -O2, and CANN's bisheng
#: on the AscendC kernels of a similar size; a 1 GiB margin keeps the page cache and the build's Python
#: alive. 4 GiB per job is what PyTorch-extension builds (PyTorch, vLLM) tell users to budget.
GIB_PER_JOB = 4

#: A cgroup limit at or above this means "no limit" (v1 writes a page-rounded 2**63-1).
UNLIMITED = 1 << 60


@dataclass(frozen=True)
class JobBudget:
    jobs: int
    why: str


def _read_int(path: Path) -> Optional[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max" or not text.isdigit():
        return None
    value = int(text)
    return value if value < UNLIMITED else None


def cgroup_memory_limit(
    proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> Optional[int]:
    """The tightest memory limit of this process's cgroup and its ancestors (v2 `memory.max`, v1
    `memory.limit_in_bytes`); None when there is none."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        here = base / path.lstrip("/")
        while True:
            value = _read_int(here / name)
            if value is not None:
                limits.append(value)
            if here == base or base not in here.parents:
                break
            here = here.parent
    return min(limits) if limits else None


def job_budget(cpus: int, mem_available: int, cgroup_limit: Optional[int], gib_per_job: int = GIB_PER_JOB) -> JobBudget:
    """min(cores, min(MemAvailable, cgroup limit) / GIB_PER_JOB), at least 1, with the reason in words."""
    usable = [m for m in (mem_available, cgroup_limit) if m]
    if not usable:
        return JobBudget(max(1, cpus), f"{cpus} cores; memory unknown")
    memory = min(usable)
    source = "cgroup limit" if cgroup_limit and cgroup_limit <= (mem_available or cgroup_limit) else "MemAvailable"
    jobs = max(1, min(cpus, memory // (gib_per_job * GIB)))
    return JobBudget(jobs, f"{cpus} cores, {memory / GIB:.1f} GiB usable ({source}) at {gib_per_job} GiB per job")


def host_job_budget(explicit: Optional[int] = None) -> JobBudget:
    """This host's budget now (`install --jobs N` wins)."""
    if explicit:
        return JobBudget(explicit, "--jobs")
    return job_budget(usable_cpus(), memory_bytes().get("MemAvailable", 0), cgroup_memory_limit())
