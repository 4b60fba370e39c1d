"""triton: upstream triton out, triton-ascend in (last), and proof that kernel[grid] works."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Dict

from ascend_setup.errors import StepFailed
from ascend_setup.procs import capture
from ascend_setup.steps.base import Context, Step
from ascend_setup.steps.common import indexes_of, installed_versions, installer_of, python_of, row_of

#: Run from a file: triton.jit reads the kernel's source with inspect, which `python -c` cannot give.
CHECK = '''\
import sys
import triton


def _kernel(x):
    return x


kernel = triton.jit(_kernel)
try:
    launcher = kernel[(1,)]
except TypeError as exc:
    print(f"triton.jit returned {type(kernel).__name__}: {exc}")
    sys.exit(3)
print(f"ok: triton.jit returned {type(kernel).__name__}, indexable")
'''


def triton_check(ctx: Context) -> str:
    """'' when kernel[grid] works in the venv, else what went wrong. Leaves nothing behind."""
    with tempfile.TemporaryDirectory(prefix="ascend-setup-triton-") as tmp:
        script = Path(tmp) / "triton_check.py"
        script.write_text(CHECK)
        proc = capture([python_of(ctx), "-B", str(script)], timeout=120)
    if proc.returncode == 0:
        return ""
    text = (proc.stdout + proc.stderr).strip()
    return text.splitlines()[-1] if text else f"exit {proc.returncode}"


class Triton(Step):
    """remove upstream triton, install triton-ascend last, check that kernel[grid] works"""

    name = "triton"
    depends_on = ("plugin-deps",)

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        idx = indexes_of(ctx)
        return {"triton-ascend": row_of(ctx).packages["triton-ascend"], "index": idx.index_url,
                "extra": list(idx.extra_index_urls)}

    def is_done(self, ctx: Context) -> bool:
        installed = installed_versions(ctx)
        return "triton" not in installed and \
            installed.get("triton-ascend") == row_of(ctx).packages["triton-ascend"] and not triton_check(ctx)

    def run(self, ctx: Context, log: Path) -> Dict[str, Any]:
        installer = installer_of(ctx)
        python = python_of(ctx)
        removed = "triton" in installed_versions(ctx)
        if removed:
            installer.uninstall(python, ["triton"], log=log)
        # --force-reinstall: removing triton deleted files under triton/ that triton-ascend also owns.
        installer.install(python, [f"triton-ascend=={row_of(ctx).packages['triton-ascend']}"], log=log,
                          indexes=indexes_of(ctx), no_deps=True, force_reinstall=True)
        problem = triton_check(ctx)
        with log.open("a") as handle:
            handle.write(f"triton check: {problem or 'ok'}\n")
        if problem:
            raise StepFailed(f"triton.jit still does not give an indexable kernel: {problem}",
                             hint="something else ships a triton/ package; see ascend-setup audit --venv")
        return {"removed_upstream_triton": removed}
