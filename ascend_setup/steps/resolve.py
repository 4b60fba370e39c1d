"""resolve: the reachability gate, then one resolution for this host, written to
`<workdir>/lock/<target>.txt`. Every later package step installs its slice of that lock."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from ascend_setup.engine.step import Step
from ascend_setup.errors import AscendSetupError, StepFailed
from ascend_setup.host.machine import this_machine
from ascend_setup.host.npu import host_npu
from ascend_setup.host.toolchain import toolchain_checks
from ascend_setup.index.download import sha256_of
from ascend_setup.index.http import IndexUnreachable
from ascend_setup.index.reach import IndexNeed, check_indexes
from ascend_setup.matrix.models import MIRROR
from ascend_setup.matrix.soc import label
from ascend_setup.resolve.closure import IndexSources, inputs_digest
from ascend_setup.resolve.lockfile import Lock, lock_file_name, read_lock, write_lock
from ascend_setup.resolve.pythons import build_interpreter, decide_python
from ascend_setup.resolve.requirement_set import Derived
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.mirror import ChooseMirror
from ascend_setup.steps.outputs import LockRef
from ascend_setup.steps.preflight import Preflight, preflight_sources
from ascend_setup.utils.files import atomic_write_text, make_dir, open_append
from ascend_setup.utils.inputs import read_input_text


def lock_path(ctx: InstallSession) -> Path:
    return ctx.workdir.lock_dir / lock_file_name(ctx.the_row.cann, ctx.target)


def sources_of(ctx: InstallSession) -> IndexSources:
    idx = ctx.indexes
    return IndexSources.for_row(ctx.the_matrix, ctx.the_row, idx.index_url, idx.extra_index_urls)


def _upstream_known(ctx: InstallSession) -> bool:
    """The host's target and the mirror are known only once preflight and mirror ran (not in a dry run)."""
    return ctx.has(Preflight) and ctx.has(ChooseMirror)


def _lock_dir(directory: Path) -> Path:
    """The lock's directory, replacing the run-lock file the pre-lock versions kept under that name (ours: a
    few bytes, a pid)."""
    if (
        directory.is_file()
        and not directory.is_symlink()
        and directory.stat().st_size < 32
        and directory.read_text().strip().isdigit()
    ):
        directory.unlink()
    return make_dir(directory)


def _log_derived(log: Path, derived: List[Derived]) -> None:
    with open_append(log) as handle:
        handle.write("derived requirement set (in/out, requirement, why, sources):\n")
        for d in derived:
            handle.write(
                f"  {'IN ' if d.included else 'OUT'} {d.requirement():<45} {d.why}  [{'; '.join(d.sources)}]\n"
            )


def gate_lock(lock: Lock, row_names: List[str], pool: Optional[Dict[str, Any]] = None) -> None:
    """A lock made elsewhere: its indexes must answer here and serve its row packages, in seconds (`pool`: the
    session's, whose pages a bundle answers)."""
    needs = []
    for index, url in lock.indexes.items():
        pins = {p.name: p.version or "" for p in lock.packages if p.index == index and p.name in row_names}
        if pins:
            needs.append(IndexNeed(index, [url, *(lock.extra_index_urls if index == MIRROR else [])], pins))
    problems = [c for c in check_indexes(needs, indexes=pool) if not c.ok]
    if problems:
        raise StepFailed("; ".join(c.message() for c in problems), hint=problems[0].hint())


class Resolve(Step[LockRef]):
    """check every index answers, then resolve the whole closure for this host into a lock"""

    name = "resolve"
    Output = LockRef
    depends_on = ("preflight", "mirror")

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        given = ctx.options.lock
        if given:
            return {"lock_file": given, "sha256": sha256_of(Path(given)) if Path(given).is_file() else None}
        if not _upstream_known(ctx):
            return {"inputs": "known after preflight and mirror"}
        return {"inputs": inputs_digest(ctx.the_row, ctx.target, sources_of(ctx), ctx.device)}

    def is_done(self, ctx: InstallSession) -> bool:
        if not _upstream_known(ctx):
            return False
        path = lock_path(ctx)
        if not path.is_file():
            return False
        given = ctx.options.lock
        if given:
            return Path(given).is_file() and sha256_of(Path(given)) == sha256_of(path)
        try:
            return read_lock(path).inputs == inputs_digest(ctx.the_row, ctx.target, sources_of(ctx), ctx.device)
        except Exception:  # a damaged lock of ours is simply made again
            return False

    def run(self, ctx: InstallSession, log: Path) -> LockRef:
        path = _lock_dir(ctx.workdir.lock_dir) / lock_path(ctx).name
        row = ctx.the_row
        given = ctx.options.lock
        if given:
            lock = read_lock(Path(given))
            check_lock_device(lock, ctx.device)
            gate_lock(lock, list(row.packages), ctx.index.pool() if ctx.index else None)
            atomic_write_text(path, read_input_text(given, "lock"))  # never through a link at `path`
            with open_append(log) as handle:
                handle.write(
                    f"installing the lock {given} (made for {lock.target.arch} / glibc {lock.target.glibc} "
                    f"/ Python {lock.target.python})\n"
                )
            return LockRef(lock=str(path), packages=len(lock.packages), source=given)
        sources = sources_of(ctx)
        checks = ctx.the_index.gate(row, sources)
        with open_append(log) as handle:
            for check in checks:
                handle.write(
                    f"gate: {check.need.name} {', '.join(check.need.urls)}: {'ok' if check.ok else check.message()}\n"
                )
        problems = [c for c in checks if not c.ok]
        if problems:
            raise StepFailed("; ".join(c.message() for c in problems), hint=problems[0].hint())
        try:
            target = ctx.target
            lock = ctx.the_index.resolve(
                row,
                target,
                sources,
                checks=checks,
                on_derived=lambda derived: _log_derived(log, derived),
                build_python=build_interpreter(target.python, ctx.get(Preflight).python),
                device=ctx.device,
            )
        except IndexUnreachable as exc:
            raise StepFailed(exc.message, hint=exc.hint) from None
        check_build_tools(ctx, lock, log)  # before the lock is written: a resumed run checks again
        write_lock(lock, path)
        counts = lock.summary()
        with open_append(log) as handle:
            handle.write(f"lock {path}: {counts}\n")
            for w in lock.warnings:
                handle.write(f"warning ({w.id}): {w.message}\n")
        return LockRef(lock=str(path), packages=counts["packages"], source="resolved")


def check_lock_device(lock: Lock, device: Optional[str]) -> None:
    """A lock made for other NPUs would install a vllm-ascend wheel this host's worker refuses."""
    plugin = next((p for p in lock.packages if p.name == "vllm-ascend"), None)
    made_for = lock.target.device
    if device and made_for and made_for != device and plugin is not None and plugin.outcome == "wheel":
        raise StepFailed(
            f"the lock {lock.cann} was made for {label(made_for)} NPUs and takes vllm-ascend's wheel; "
            f"this host's NPUs are {label(device)}",
            hint=f"make a lock for this host: ascend-setup plan --cann {lock.cann} --soc {label(device)} "
            "--lock FILE (it builds vllm-ascend from source)",
        )


def check_build_tools(ctx: InstallSession, lock: Lock, log: Path) -> None:
    """The lock builds vllm-ascend from source: its whole toolchain (the compilers, CANN's tools, the lock's
    cmake and setuptools) is checked now, before any download, and every missing piece is named at once."""
    plugin = next((p for p in lock.packages if p.name == "vllm-ascend"), None)
    if plugin is None or plugin.outcome != "sdist":
        return
    toolkit = ctx.get(Preflight).cann_toolkit
    checks = toolchain_checks(
        ctx.the_row,
        toolkit=Path(toolkit) if toolkit else None,
        arch=ctx.target.arch,
        pins={p.name: p.version for p in lock.packages},
        backend=plugin.backend,
    )
    with open_append(log) as handle:
        handle.write(f"vllm-ascend is built from source ({plugin.reason}); its toolchain:\n")
        handle.writelines(c.line() + "\n" for c in checks)
    failed = [c for c in checks if not c.ok]
    if failed:
        raise StepFailed(
            f"vllm-ascend must be built from source and {len(failed)} piece(s) of its toolchain are "
            "missing: " + "; ".join(f"{c.id}: {c.detail}" for c in failed),
            hint=" / ".join(dict.fromkeys(c.fix or "" for c in failed)),
        )


def preview_closure(ctx: InstallSession) -> Dict[str, Any]:
    """For `install --dry-run`: the closure this host's install will take, touching nothing: the lock given
    with --lock, else the workdir's when there is one, else a resolution made now (the mirror as preflight
    would see it)."""
    ref = ctx.recorded(Resolve)
    recorded = ctx.options.lock or (ref.lock if ref else None)
    if recorded and Path(recorded).is_file():
        lock, source = read_lock(Path(recorded)), recorded
    else:
        row, sources = ctx.the_row, preflight_sources(ctx)
        try:
            interpreter = decide_python(
                row, sources, explicit=ctx.options.python, pool=ctx.the_index.pool()
            ).interpreter
            device = ctx.device or host_npu(ctx.options.cann_home).device_type  # as preflight finds it
            lock = ctx.the_index.resolve(
                row,
                this_machine(interpreter.minor),
                sources,
                build_python=build_interpreter(interpreter.minor, interpreter.path),
                device=device,
            )
        except AscendSetupError as exc:
            return {"lock": None, "error": exc.message, "hint": exc.hint}
        source = None
    return {
        "lock": source,
        "target": lock.target.model_dump(),
        "summary": lock.summary(),
        "download_bytes": lock.download_bytes,
        "not_wheels": [
            {"name": p.name, "version": p.version, "outcome": p.outcome, "reason": p.reason}
            for p in lock.packages
            if p.outcome != "wheel"
        ],
        "warnings": [w.model_dump() for w in lock.warnings],
    }
