"""`ascend-setup plan`: the whole closure a target's install will take (wheel, source build or
unavailable, per package), resolved once; `--lock FILE` keeps it for `install --lock`."""

from __future__ import annotations

import argparse
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

from pydantic import BaseModel, ConfigDict
from typing_extensions import Literal

from ascend_setup.cli import flags, values
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.render import Output, stderr_console, stdout_console, table
from ascend_setup.errors import named_by
from ascend_setup.utils.paths import PYTHON, check_output_file

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.resolve.lockfile import Lock


class PlanOptions(Options):
    cann: str
    glibc: Optional[str] = None
    arch: Optional[str] = None
    python: Optional[str] = None
    index_url: Optional[str] = None
    extra_index_url: Optional[List[str]] = None
    index: Optional[List[str]] = None
    respect_pip_config: bool = False
    lock: Optional[str] = None
    soc: str  # the device type (`values.device`), default A2
    vllm_ascend: Optional[str] = None
    matrix: Optional[str] = None  # type: ignore[assignment]  # as given: its errors name it so


class PlanDocument(BaseModel):
    """`plan --json`: the closure of one target, package by package, and the lock it was written to."""

    model_config = ConfigDict(extra="forbid")

    scope: Literal["closure"] = "closure"
    cann: str
    target: Dict[str, Any]
    indexes: Dict[str, str]
    extra_index_urls: List[str]
    summary: Dict[str, int]
    download_bytes: int
    packages: List[Dict[str, Any]]
    warnings: List[Dict[str, Any]]
    lock: Optional[str] = None


DOCUMENTS: Dict[str, Type[BaseModel]] = {"plan": PlanDocument}


def size_text(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n else "-"


def plan_document(lock: Lock, lock_path: str = "") -> PlanDocument:
    data = lock.to_json()
    return PlanDocument(
        cann=lock.cann,
        target=data["target"],
        indexes=data["indexes"],
        extra_index_urls=data["extra_index_urls"],
        summary=lock.summary(),
        download_bytes=lock.download_bytes,
        packages=data["packages"],
        warnings=data["warnings"],
        lock=lock_path or None,
    )


def render_plan(lock: Lock, lock_path: str = "", console: Optional[Console] = None) -> None:
    """Counts first, then one short row per package (a plain line each when even that is too wide for the
    terminal: a cropped table cut 'mirror' to 'mirro' and '266.0 MB' to '266.0'); file names and reasons
    on their own lines."""
    from ascend_setup.matrix.soc import label

    console = console or stdout_console()
    t, counts = lock.target, lock.summary()
    npus = f" / {label(t.device)} NPUs" if t.device else ""
    console.print(
        f"[bold]CANN {lock.cann} on glibc {t.glibc} / {t.arch} / Python {t.python}{npus}[/bold]: "
        f"{counts['packages']} packages, {counts['wheels']} wheels, {counts['sdists']} source builds, "
        f"{counts['unavailable']} unavailable; {size_text(lock.download_bytes)} to download",
        soft_wrap=True,
    )
    used = {p.index for p in lock.packages}
    for name, url in lock.indexes.items():
        if name in used:
            console.print(f"  index {name}: {url}", soft_wrap=True, markup=False)
    header = ["package", "outcome", "MB", "index"]
    rows = [
        [p.requirement() if p.version else p.name, p.outcome, f"{p.size / 1e6:.1f}" if p.size else "-", p.index]
        for p in lock.packages
    ]
    packages = table(None, header, rows, status_column=1, compact=True)
    if console.measure(packages, options=console.options.update_width(10_000)).maximum <= console.width:
        console.print(packages)
    else:  # names too long for this terminal: one line each, nothing cropped
        for row in [header, *rows]:
            console.print("  ".join(row), soft_wrap=True, markup=False)
    special = [p for p in lock.packages if p.outcome != "wheel"]
    if special:
        console.print("[bold]not a wheel:[/bold]")
        for p in special:
            console.print(f"  {p.name} {p.version or ''}: {p.outcome} {p.file or ''}", soft_wrap=True, markup=False)
            console.print(f"      {p.reason or ''}", soft_wrap=True, markup=False)
    for w in lock.warnings:
        console.print(f"[yellow]warning[/yellow] ({w.id}): {w.message}", soft_wrap=True)
    if lock_path:
        console.print(f"lock written to {lock_path}", soft_wrap=True, markup=False)


def run(args: PlanOptions, output: Output) -> Result:
    from ascend_setup.host.machine import glibc_version
    from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings
    from ascend_setup.index.tags import Target, parse_arch, parse_glibc
    from ascend_setup.index.urls import index_overrides
    from ascend_setup.matrix import load_matrix, select_row
    from ascend_setup.matrix.newcann import provenance_line, with_derived_row
    from ascend_setup.resolve.closure import IndexSources
    from ascend_setup.resolve.index_session import IndexSession
    from ascend_setup.resolve.lockfile import LockWarning, write_lock
    from ascend_setup.resolve.pythons import build_interpreter, names_interpreter, target_python
    from ascend_setup.steps.options import which_index

    matrix = load_matrix(args.matrix).with_indexes(index_overrides(args.index))
    with named_by("--glibc"):  # the flags' shapes, before anything is asked of the network
        glibc = parse_glibc(args.glibc or glibc_version() or "")
    with named_by("--arch"):
        arch = parse_arch(args.arch or platform.machine())
    device = args.soc
    lock_path = Path(args.lock).expanduser().absolute() if args.lock else None
    if lock_path is not None:
        check_output_file(lock_path, "--lock")
    settings = network_settings_for_this_run(pip_settings(respect=args.respect_pip_config))
    mirror = which_index(args.index_url, None, lambda: settings.index)
    matrix, derived = with_derived_row(matrix, args.cann, args.vllm_ascend, lambda: mirror)
    if derived is not None:
        stderr_console().print(provenance_line(derived, matrix), soft_wrap=True, markup=False)
    row = select_row(matrix, args.cann, arch)
    extras = args.extra_index_url or []
    sources = IndexSources.for_row(matrix, row, mirror, extras)
    given, given_as = PYTHON.value(args.python)
    index = IndexSession(settings)
    python, note = target_python(given, row, sources, arch, glibc, index, given_as)
    target = Target.parse(glibc, arch, python)
    interpreter = given if given and names_interpreter(given) else None
    lock = index.resolve(row, target, sources, build_python=build_interpreter(python, interpreter), device=device)
    if note:
        lock.warnings.insert(0, LockWarning(id="python-assumed", package=None, message=note))
    written = str(write_lock(lock, lock_path)) if lock_path else ""
    return Result(
        1 if lock.unavailable else 0, plan_document(lock, written), lambda console: render_plan(lock, written, console)
    )


def plan_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.cann(p, required=True)
    flags.target(p)
    flags.python(
        p,
        "target Python, e.g. 3.11, or an interpreter (default: the one install would pick, by the wheels "
        "the row publishes)",
        metavar="X.Y|EXE",
    )
    flags.index_url(p, "primary index (default: pip's configuration)")
    flags.extra_index_url(p, "another index beside the primary one, for anything the row does not assign (repeatable)")
    flags.index_overrides(p)
    flags.lock(p, "write the resolved lock for this target to FILE")
    flags.soc(
        p,
        "the target's NPUs: A2, A3, 310P, A5 or a SOC_VERSION such as ascend910_9391; a published "
        "vllm-ascend wheel is taken only for the device type it was built for (default A2, the public wheels' "
        "type)",
        metavar="DEVICE|SOC_VERSION",
        default="A2",
        type=values.device,
    )
    flags.vllm_ascend(p)
    p.set_defaults(func=run, options=PlanOptions)


ARGUMENTS = {"plan": plan_arguments}
