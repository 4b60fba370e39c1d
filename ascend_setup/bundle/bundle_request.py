"""What `bundle` is asked, and the request `make_bundle` runs from it: every flag and path checked, the row and
the target's Python chosen, before the bundle directory is made."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from pydantic import BaseModel, ConfigDict
from typing_extensions import Literal

from ascend_setup.bundle.make import BundleRequest, built_wheel, staging_dir
from ascend_setup.errors import BadInput
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings
from ascend_setup.index.tags import Target
from ascend_setup.index.urls import index_overrides
from ascend_setup.managed.pinned import PythonBuild, PythonBuilds, load_builds
from ascend_setup.matrix.load import load_matrix, select_row
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.newcann import provenance_line, with_derived_row
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.resolve.index_session import IndexSession
from ascend_setup.resolve.lockfile import read_lock
from ascend_setup.resolve.pythons import build_interpreter, target_python
from ascend_setup.utils.paths import check_dir_path, check_output_file


class BundleOptions(BaseModel):
    """`bundle`'s flags (and `bundle verify`'s, which argparse parses under them), each checked as it was
    parsed: the index URLs, `--soc` (a device type, or one SOC_VERSION), the http(s) URLs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cann: Optional[str] = None
    glibc: Optional[str] = None
    arch: Optional[str] = None
    python: Optional[str] = None
    soc: Tuple[str, Optional[str]]  # (device type, SOC_VERSION or None): `values.npus`
    lock: Optional[str] = None
    wheelhouse: Optional[str] = None
    index_url: Optional[str] = None
    extra_index_url: Optional[List[str]] = None
    index: Optional[List[str]] = None
    respect_pip_config: bool = False
    vllm_ascend: Optional[str] = None
    build_deps_url: Optional[str] = None
    tool_index_url: Optional[str] = None
    with_python: bool = False
    python_mirror: Optional[str] = None
    python_builds: Optional[str] = None
    out: Optional[str] = None
    format: Literal["dir", "tar"] = "dir"
    matrix: Optional[str] = None  # as given: its errors name it so


@dataclass(frozen=True)
class Prepared:
    """A bundle's request, less the directory it is made in."""

    out: Path
    row: Row
    target: Target
    index: IndexSession
    request: Callable[[Path], BundleRequest]  # the request, for the bundle directory


def managed_build(builds: PythonBuilds, target: Target) -> PythonBuild:
    """The pinned CPython build --with-python carries: the target's Python, for its architecture."""
    found = builds.find(target.python, target.arch)
    if found is None:
        have = ", ".join(builds.minors(target.arch)) or "none"
        raise BadInput(
            f"--with-python: no pinned CPython {target.python} build for {target.arch} (pinned: {have})",
            hint="pass --python with a pinned version, or --python-builds FILE naming one",
        )
    return found


def _checked_paths(o: BundleOptions, out: Path) -> Tuple[Optional[Path], Optional[Path]]:
    """-o, --lock and --wheelhouse, before anything is asked of the network: (lock, wheelhouse)."""
    if o.format == "tar":
        check_output_file(out, "-o")
        check_dir_path(staging_dir(out), "-o")
    else:
        check_dir_path(out, "-o")
    lock_file = Path(o.lock).expanduser().absolute() if o.lock else None
    if lock_file is not None:
        read_lock(lock_file)  # a bad --lock is refused before the bundle directory is made
    wheelhouse = Path(o.wheelhouse).expanduser().absolute() if o.wheelhouse else None
    if wheelhouse is not None and not wheelhouse.is_dir():
        raise BadInput(f"--wheelhouse {wheelhouse} is not a directory")
    if (o.python_mirror or o.python_builds) and not o.with_python:
        raise BadInput(
            "--python-mirror and --python-builds choose the interpreter --with-python carries: add --with-python"
        )
    return lock_file, wheelhouse


def _python_builds(o: BundleOptions) -> Optional[PythonBuilds]:
    """--with-python's pinned builds: --python-builds (or its variable, checked now), else the packaged ones."""
    from ascend_setup.steps.options import check_python_builds  # the install's check, shared

    return load_builds(check_python_builds(o.python_builds)) if o.with_python else None


def prepare(o: BundleOptions, say: Callable[[str], None]) -> Prepared:
    """Every check a bundle needs before its directory is made, in the order a user meets them; `say` tells
    what was assumed (a derived row, the target's Python) as it is."""
    if not o.cann or not o.out:
        raise BadInput("bundle needs --cann VERSION and -o PATH (or: ascend-setup bundle verify PATH)")
    matrix = load_matrix(o.matrix).with_indexes(index_overrides(o.index))
    arch = o.arch or platform.machine()
    glibc = o.glibc or glibc_version() or ""
    Target.parse(glibc, arch, o.python or "3.11")
    device, soc = o.soc
    out = Path(o.out).expanduser().absolute()
    lock_file, wheelhouse = _checked_paths(o, out)
    settings = network_settings_for_this_run(pip_settings(respect=o.respect_pip_config))
    mirror = o.index_url or settings.index
    matrix, derived = with_derived_row(matrix, o.cann, o.vllm_ascend, lambda: mirror)
    derived_line = provenance_line(derived, matrix) if derived is not None else None
    if derived_line:
        say(derived_line)
    row = select_row(matrix, o.cann, arch)
    sources = IndexSources.for_row(matrix, row, mirror, o.extra_index_url or [])
    index = IndexSession(settings)
    python, note = target_python(o.python, row, sources, arch, glibc, index)
    if note:
        say(f"note: {note}")
    target = Target.parse(glibc, arch, python)
    python_builds = _python_builds(o)
    python_build = managed_build(python_builds, target) if python_builds is not None else None
    if wheelhouse is not None:
        built_wheel(wheelhouse, row, target, soc)  # a --wheelhouse without the target's wheel: refused now

    def request(directory: Path) -> BundleRequest:
        return BundleRequest(
            out=directory,
            row=row,
            target=target,
            sources=sources,
            device=device,
            soc=soc,
            derived=derived_line,
            lock_file=lock_file,
            wheelhouse=wheelhouse,
            build_deps_url=o.build_deps_url,
            build_python=build_interpreter(python),
            tool_index=o.tool_index_url or mirror,
            log=directory / "bundle.log",
            python_build=python_build,
            python_builds=python_builds,
            python_mirror=o.python_mirror,
        )

    return Prepared(out, row, target, index, request)
