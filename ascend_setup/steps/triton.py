"""triton: upstream triton out, triton-ascend in (last), and proof that kernel[grid] works.

The swap is atomic in the way that matters: triton-ascend is fetched and hash-checked first, while
upstream triton is still in place. Only then is triton removed and the local file installed. A venv
is never left with neither (torch's and xgrammar's `triton` requirements would then be unmet).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Dict

from ascend_setup.dists.installers import InstallRequest
from ascend_setup.engine.step import Step
from ascend_setup.errors import AscendSetupError, StepFailed
from ascend_setup.index.download import download
from ascend_setup.resolve.lockfile import LockedPackage, render_requirements
from ascend_setup.steps.common import installed_versions
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.outputs import TritonSwapped
from ascend_setup.steps.packages import slice_of, unmet
from ascend_setup.utils.files import atomic_write_text, make_dir, open_append
from ascend_setup.utils.procs import capture

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


def triton_check(ctx: InstallSession) -> str:
    """'' when kernel[grid] works in the venv, else what went wrong. Leaves nothing behind."""
    with tempfile.TemporaryDirectory(prefix="ascend-setup-triton-") as tmp:
        script = Path(tmp) / "triton_check.py"
        script.write_text(CHECK)
        proc = capture([ctx.python, "-B", str(script)], timeout=120)
    if proc.returncode == 0:
        return ""
    text = (proc.stdout + proc.stderr).strip()
    return text.splitlines()[-1] if text else f"exit {proc.returncode}"


def fetch_verified(ctx: InstallSession, package: LockedPackage) -> Path:
    """The locked file on the workdir's disk, hash-checked; the venv is not touched."""
    untouched = "upstream triton (if any) is still installed; the venv is unchanged"
    if package.outcome == "unavailable" or not package.url or not package.file:
        raise StepFailed(
            f"triton-ascend {package.version or ''} has no file for this host: {package.reason}", hint=untouched
        )
    if ctx.bundle is not None:
        return ctx.bundle.file(package.file, package.sha256)
    try:
        return download(
            [package.url],
            ctx.workdir.downloads / package.file,
            sha256=package.sha256,
            size=package.size,
            stall_seconds=20,
        )
    except AscendSetupError as exc:
        raise StepFailed(
            f"triton-ascend {package.version} could not be fetched from {package.index_url}: {exc.message}",
            hint=f"{untouched}; pass --index {package.index}=URL for a reachable mirror of that index",
        ) from None


class Triton(Step[TritonSwapped]):
    """remove upstream triton, install triton-ascend last, check that kernel[grid] works"""

    name = "triton"
    Output = TritonSwapped
    depends_on = ("plugin-deps",)

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        return {
            "packages": [f"{p.requirement()} {p.sha256 or ''}" for p in slice_of(ctx, self.name)],
            "installer": ctx.options.installer,
        }

    def is_done(self, ctx: InstallSession) -> bool:
        installed = installed_versions(ctx)
        return (
            "triton" not in installed
            and bool(slice_of(ctx, self.name))
            and not unmet(ctx, slice_of(ctx, self.name))
            and not triton_check(ctx)
        )

    def run(self, ctx: InstallSession, log: Path) -> TritonSwapped:
        lock = ctx.lock()
        entry = lock.get("triton-ascend") if lock else None  # an unavailable entry is in no slice, but says why
        if entry is None:
            raise StepFailed(
                f"the lock has no triton-ascend {ctx.the_row.packages['triton-ascend']}",
                hint="rerun: the resolve step makes the lock again",
            )
        locked = [entry]
        local = fetch_verified(ctx, entry)
        with open_append(log) as handle:
            handle.write(f"fetched and verified {local} (sha256 {entry.sha256})\n")
        installer = ctx.installer()
        python = ctx.python
        removed = "triton" in installed_versions(ctx)
        if removed:
            installer.uninstall(python, ["triton"], log=log)
        # By name from the verified file's directory (an ordinary install, not a direct URL), hash-pinned.
        # --force-reinstall: removing triton deleted files under triton/ that triton-ascend also owns.
        requirements = make_dir(ctx.workdir.downloads) / f"{local.name}.requirements.txt"  # not into a bundle
        atomic_write_text(requirements, render_requirements(locked))
        installer.install(
            python,
            InstallRequest(requirement_file=requirements, find_links=local.parent, force_reinstall=True),
            log=log,
        )
        problem = triton_check(ctx)
        with open_append(log) as handle:
            handle.write(f"triton check: {problem or 'ok'}\n")
        if problem:
            raise StepFailed(
                f"triton.jit still does not give an indexable kernel: {problem}",
                hint="something else ships a triton/ package; see ascend-setup audit --venv",
            )
        return TritonSwapped(removed_upstream_triton=removed)
