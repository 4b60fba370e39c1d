"""preflight: the host can take this row (CANN, interpreter, disk) before anything is installed."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any, Dict, Optional

from ascend_setup.errors import AscendSetupError
from ascend_setup.host.cann import CannInstall, primary_cann, same_cann
from ascend_setup.host.interpreters import choose_interpreter, probe
from ascend_setup.host.machine import free_disk_bytes, glibc_version, usable_cpus, memory_bytes
from ascend_setup.host.npu import npu_facts
from ascend_setup.matrix.models import Row
from ascend_setup.steps.base import Context, Step

GIB = 1024 ** 3


def _cann_matches(row: Row, found: Optional[CannInstall], force: bool) -> None:
    if found is None:
        raise AscendSetupError("no CANN toolkit found", hint=f"install CANN {row.cann} or pass --cann-home DIR")
    if not same_cann(found.version, row.cann) and not force:
        raise AscendSetupError(
            f"CANN {found.version} is installed at {found.toolkit}, but the row needs CANN {row.cann}",
            hint=f"install CANN {row.cann}, use --cann {found.version} if the matrix knows it, or --force")


class Preflight(Step):
    """check CANN, interpreter, glibc, cores, memory and disk against the row"""

    name = "preflight"

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        o = ctx.options
        return {"cann": o["cann"], "cann_home": o.get("cann_home"), "python": o.get("python"),
                "force": o.get("force", False), "soc": o.get("soc")}

    def is_done(self, ctx: Context) -> bool:
        out = ctx.outputs.get(self.name)
        if not out:
            return False
        interp = probe(out["python"])
        if interp is None or interp.version != out["python_version"]:
            return False
        found = primary_cann(ctx.options.get("cann_home"))
        return found is not None and same_cann(found.version, out["cann_version"])

    def run(self, ctx: Context, log: Path) -> Dict[str, Any]:
        row: Row = ctx.extras["row"]
        options = ctx.options
        found = primary_cann(options.get("cann_home"))
        _cann_matches(row, found, bool(options.get("force")))
        assert found is not None
        interp = choose_interpreter(row.python, options.get("python"))
        need = row.disk_gib * GIB
        free = free_disk_bytes(ctx.workdir)
        if free < need:
            raise AscendSetupError(f"{free / GIB:.1f} GiB free at {ctx.workdir}; the row needs {row.disk_gib} GiB",
                                   hint="free space or pass another --workdir")
        soc = options.get("soc")
        npu = None
        if not soc:
            driver = found.driver.root if found.driver else None
            npu = npu_facts(driver)
            soc = npu.soc_version
        facts = {
            "python": interp.path, "python_version": interp.version,
            "cann_version": found.version, "cann_toolkit": found.toolkit, "cann_root": found.root,
            "set_env": [str(p) for p in found.set_env_scripts()],
            "glibc": glibc_version(), "arch": platform.machine(), "cpus": usable_cpus(),
            "mem_total": memory_bytes().get("MemTotal", 0), "soc": soc,
            "npu_error": npu.error if npu else None,
        }
        with log.open("a", encoding="utf-8") as handle:
            for key, value in facts.items():
                handle.write(f"{key}: {value}\n")
        return facts
