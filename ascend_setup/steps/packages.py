"""The lock's slices and the steps that install them: cann-python-deps, torch-stack, vllm, plugin-deps.

Each step installs exactly its slice of the lock: one hash per package, --no-deps, one invocation per
index (a package the row assigns to a named index is fetched from it and from nowhere else). Nothing
is resolved again, so what gets installed is what `plan` forecast.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

from ascend_setup.dists.installed import VenvContents
from ascend_setup.dists.installers import Indexes, Installer, InstallRequest
from ascend_setup.dists.record import Damage, damage_in, drop_bytecode, nameless_damage
from ascend_setup.dists.versions import local_only_differs, same_version
from ascend_setup.engine.step import Step
from ascend_setup.errors import AscendSetupError
from ascend_setup.index.download import PER_HOST, download_split, each, sha256_of
from ascend_setup.matrix.models import MIRROR, Row
from ascend_setup.resolve.lockfile import Lock, LockedPackage, render_requirements
from ascend_setup.steps.common import row_requirements_unmet, venv_contents, versions_in
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.outputs import SliceInstalled
from ascend_setup.utils.files import atomic_write_text, open_append

TORCH_STACK = ["torch", "torch-npu", "torchvision", "torchaudio"]
#: The order in which steps take their slices; a package belongs to the first slice that reaches it.
SLICE_ORDER = ("venv", "cann-python-deps", "torch-stack", "vllm", "plugin-deps", "triton", "vllm-ascend")
LAST = ("triton-ascend", "vllm-ascend")  # installed by their own steps, after everything else


def lock_slices(lock: Lock, row: Row) -> Dict[str, List[LockedPackage]]:
    """step -> the packages it installs: its roots and what they require that no earlier step took."""
    roots = {
        "venv": ["pip"],
        "cann-python-deps": list(row.cann_python_deps),
        "torch-stack": TORCH_STACK,
        "vllm": ["vllm"],
        "plugin-deps": [p.name for p in lock.packages if p.name not in LAST],
        "triton": ["triton-ascend"],
        "vllm-ascend": ["vllm-ascend"],
    }
    taken: Set[str] = set()
    slices: Dict[str, List[LockedPackage]] = {}
    for step in SLICE_ORDER:
        skip = taken | (set(LAST) if step == "plugin-deps" else set())
        slices[step] = [p for p in lock.closure_of(roots[step], skip=skip) if p.outcome != "unavailable"]
        taken |= {p.name for p in slices[step]}
    return slices


def slice_of(ctx: InstallSession, step: str) -> List[LockedPackage]:
    lock = ctx.lock()
    return lock_slices(lock, ctx.the_row)[step] if lock else []


def unmet(ctx: InstallSession, packages: List[LockedPackage]) -> List[str]:
    """Why the venv does not hold these packages as locked: versions (local part included), and the
    row packages' own requirements on each other."""
    contents = venv_contents(ctx)  # read once for both questions: each step asks before and after it runs
    installed = versions_in(contents)
    problems = [
        f"{p.name}=={p.version} (installed: {installed.get(p.name) or 'none'})"
        for p in packages
        if not same_version(installed.get(p.name), p.version)
    ]
    return problems + row_requirements_unmet(ctx, [p.name for p in packages], contents)


def damaged(ctx: InstallSession, packages: List[LockedPackage]) -> List[Damage]:
    """The installed distributions of `packages` whose files do not match their RECORD (see distcheck)."""
    contents = venv_contents(ctx)
    if contents is None:
        return []
    return damage_in(contents, {p.name for p in packages})


def repair_damaged(
    ctx: InstallSession, step: str, packages: List[LockedPackage], log: Path, installer: Optional[Installer] = None
) -> List[Damage]:
    """Reinstall, from the lock with --force-reinstall --no-deps, each of `packages` a kill left half-written.
    A dist-info without a readable RECORD cannot be uninstalled by pip or uv: it is removed first (it is
    of this step's slice, which this step was writing when it stopped), so the install sees it absent. The
    bytecode caches of the slice and of the venv's pip, which may be short writes, are dropped first."""
    contents = venv_contents(ctx)
    for dist in contents.dists if contents is not None else ():
        if dist.name in {p.name for p in packages} | {"pip"}:
            drop_bytecode(dist.path)
    broken = damaged(ctx, packages)
    if not broken:
        return []
    with open_append(log) as handle:
        for d in broken:
            handle.write(f"half-written by the interrupted run: {d.summary()}\n")
    for d in broken:
        if not d.record_readable:
            shutil.rmtree(d.dist_info)
    names = {d.name for d in broken}
    install_locked(ctx, step, [p for p in packages if p.name in names], log, force=True, installer=installer)
    return broken


def _drop_nameless(contents: Optional[VenvContents], names: Set[str], log: Path) -> None:
    """The dist-infos of `names` a stopped install left without METADATA: uv counts each as installed (by its
    folder's name) and would skip the package, leaving the files the stop did not write missing."""
    torn = [nameless_damage(meta) for meta in (contents.nameless if contents else [])]
    for d in torn:
        if d.name in names:
            with open_append(log) as handle:
                handle.write(f"removing {d.dist_info}: {d.problems[0]} (a stopped install's; it is reinstalled)\n")
            shutil.rmtree(d.dist_info)


def fetchable(lock: Lock) -> List[LockedPackage]:
    """The lock's files an install step takes from an index, biggest first: the longest transfer starts first and
    the small files fill the other connections around it."""
    files = [
        p
        for p in lock.packages
        if p.outcome in ("wheel", "sdist")
        and p.url
        and p.file
        and p.sha256
        and not (p.name == "vllm-ascend" and p.outcome == "sdist")
    ]  # the plugin step fetches it into its tree
    return sorted(files, key=lambda p: -(p.size or 0))


def fetch_lock_files(ctx: InstallSession, log: Path) -> Path:
    """Every file of the lock on the workdir's disk, hash-checked, several at once (PER_HOST per host, a big one
    in parts over as many): an installer fetches the files of one invocation, one slice after another, and a
    single connection per file (pip: one file at a time). A file already there was checked before it was renamed
    into place; a stop leaves each file's .part to resume from its own byte. Once a run. A failure is written to
    the step's log too, where the installer's own would be."""
    downloads = ctx.workdir.downloads
    if ctx.lock_fetched:
        return downloads
    lock = ctx.lock()
    assert lock is not None, "the resolve step runs first"
    missing = [p for p in fetchable(lock) if not (downloads / str(p.file)).exists()]
    if missing:
        with open_append(log) as handle:
            handle.write(
                f"fetching {len(missing)} files of the lock ({sum(p.size or 0 for p in missing) / 1e6:.1f} "
                f"MB), up to {PER_HOST} at once from each index\n"
            )
        try:
            each(lambda p: download_split([str(p.url)], downloads / str(p.file), sha256=p.sha256, size=p.size), missing)
        except AscendSetupError as exc:
            with open_append(log) as handle:
                handle.write(f"fetching the lock's files failed: {exc.message}\n")
            raise
    ctx.lock_fetched = True
    return downloads


def _drop_mismatched(downloads: Path, group: List[LockedPackage], log: Path) -> None:
    """After an installer refused the local files: remove each that is not the lock's file (a disk or a hand
    changed it after it was checked), so the next run fetches it again instead of failing the same way."""
    for p in group:
        path = downloads / str(p.file)
        if p.file and path.is_file() and not path.is_symlink() and sha256_of(path) != p.sha256:
            path.unlink()
            with open_append(log) as handle:
                handle.write(
                    f"{path} is not the lock's file (sha256 {p.sha256}): removed; the next run fetches it again\n"
                )


def install_locked(
    ctx: InstallSession,
    step: str,
    packages: List[LockedPackage],
    log: Path,
    *,
    force: bool = False,
    installer: Optional[Installer] = None,
) -> None:
    """Install `packages` from the lock: per index, a hash-pinned requirements file, --no-deps
    (`force`: --force-reinstall, to repair; `installer`: other than the run's, for the venv's own pip)."""
    lock = ctx.lock()
    assert lock is not None, "the resolve step runs first"
    contents = venv_contents(ctx)  # read once: the torn dist-infos to drop, and what is installed
    _drop_nameless(contents, {p.name for p in packages}, log)
    installed = versions_in(contents)
    groups: Dict[str, List[LockedPackage]] = {}
    for p in packages:
        groups.setdefault(p.index, []).append(p)
    for index, group in groups.items():
        requirements = ctx.workdir.slice_file(f"{step}-{index}{'-repair' if force else ''}")
        requirements.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(requirements, render_requirements(group))
        # `==2.10.0` is met by an installed 2.10.0+cpu (PEP 440): a local-version mismatch needs a reinstall
        local_mismatch = any(local_only_differs(installed.get(p.name), p.version) for p in group)
        extras = lock.extra_index_urls if index == MIRROR else []
        bundle = ctx.bundle  # offline: --no-index, the bundle's files (hash-checked by the installer)
        local = bundle.files if bundle else (None if force else fetch_lock_files(ctx, log))
        # from the files fetched (hash-checked again by the installer); the index for a package without one, and
        # for a repair as before: uv links a local wheel's files from its cache, where a file a kill truncated in
        # the venv may be the cache's own (a hard link), and a reinstall from the same local file relinks it
        offline = bundle is not None or (local is not None and all(p.file and (local / p.file).exists() for p in group))
        try:
            (installer or ctx.installer()).install(
                ctx.python,
                InstallRequest(
                    requirement_file=requirements,
                    indexes=None if offline else Indexes(lock.indexes[index], tuple(extras)),
                    find_links=local,
                    force_reinstall=force or local_mismatch,
                ),
                log=log,
            )
        except AscendSetupError:
            if local is not None and bundle is None:
                _drop_mismatched(local, group, log)
            raise


class LockSliceStep(Step[SliceInstalled]):
    """A step that installs its slice of the lock and is done when the venv holds exactly that."""

    Output = SliceInstalled

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        return {
            "packages": [f"{p.name}=={p.version} {p.sha256 or ''}" for p in slice_of(ctx, self.name)],
            "installer": ctx.options.installer,
        }

    def is_done(self, ctx: InstallSession) -> bool:
        return ctx.lock() is not None and not unmet(ctx, slice_of(ctx, self.name))

    def why_not_done(self, ctx: InstallSession) -> str:
        return "; ".join(unmet(ctx, slice_of(ctx, self.name))) or "the lock is missing"

    def repair_interrupted(self, ctx: InstallSession, log: Path) -> None:
        if ctx.lock() is not None:
            repair_damaged(ctx, self.name, slice_of(ctx, self.name), log)

    def run(self, ctx: InstallSession, log: Path) -> SliceInstalled:
        packages = slice_of(ctx, self.name)
        install_locked(ctx, self.name, packages, log)
        problems = unmet(ctx, packages)
        if problems:
            from ascend_setup.errors import StepFailed

            raise StepFailed(
                f"after installing its slice of the lock the venv still differs: {'; '.join(problems)}",
                hint=f"see {log}",
            )
        return SliceInstalled(installed=[p.requirement() for p in packages])


class CannPythonDeps(LockSliceStep):
    """install the CANN operator compiler's Python dependencies (decorator, sympy, ...)"""

    name = "cann-python-deps"
    depends_on = ("venv",)


class TorchStack(LockSliceStep):
    """install torch, torch-npu, torchvision, torchaudio at exactly the row's versions"""

    name = "torch-stack"
    depends_on = ("cann-python-deps",)


class Vllm(LockSliceStep):
    """install vllm itself with --no-deps (its metadata would replace the row's torch)"""

    name = "vllm"
    depends_on = ("torch-stack",)


class PluginDeps(LockSliceStep):
    """install the rest of the closure: vllm's requirements minus CUDA-only ones, the plugin's pins winning"""

    name = "plugin-deps"
    depends_on = ("vllm",)
