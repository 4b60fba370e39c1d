"""The host checks that install's preflight and doctor both make, written once, and the one type of their
verdict. Doctor lists every check; preflight refuses the failing ones and adds what only an install can do
(--force)."""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ascend_setup.host.cann import CannInstall, candidate_roots, same_cann
from ascend_setup.matrix.models import Row

GIB = 1024**3


@dataclass
class Check:
    id: str
    status: str  # pass | warn | fail
    detail: str
    fix: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    def line(self) -> str:
        """One log line: ok/warn/FAIL, what, the evidence."""
        return f"  {({'pass': 'ok  ', 'warn': 'warn'}).get(self.status, 'FAIL')} {self.id}: {self.detail}"

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def check_cann(row: Row, found: Optional[CannInstall], cann_home: Optional[str]) -> Check:
    """The CANN toolkit found first (`found`, looked for under `cann_home` or the usual roots) against the row's."""
    if found is None:
        looked = ", ".join(str(p) for p in candidate_roots(cann_home))
        return Check(
            "cann",
            "fail",
            f"no CANN toolkit found (looked in {looked})",
            f"install CANN {row.cann} (Ascend-cann-toolkit_{row.cann}_linux-{platform.machine()}.run), "
            "or pass --cann-home DIR if it lives elsewhere",
        )
    where = f"{found.toolkit} ({found.layout}, version from {found.version_source})"
    if found.version is None:
        return Check("cann", "warn", f"CANN at {where} has no readable version", "reinstall the toolkit")
    if not same_cann(found.version, row.cann):
        return Check(
            "cann",
            "fail",
            f"CANN {found.version} is installed at {where}, but the row needs CANN {row.cann}",
            f"install CANN {row.cann}, or use the row of the installed CANN: --cann {found.version}",
        )
    return Check("cann", "pass", f"CANN {found.version} at {where}")


def check_disk(row: Row, workdir: Union[str, Path], free: int) -> Check:
    """`free` bytes at the workdir against the row's disk need (downloads, the build tree, the venv)."""
    text = f"{free / GIB:.1f} GiB free at {workdir}, the row needs {row.disk_gib:g} GiB"
    if free < row.disk_gib * GIB:
        return Check("disk", "fail", text, "free space or choose another --workdir")
    return Check("disk", "pass", text)
