"""The install options: checked once, recorded in state.json, replayed by `resume`."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from packaging.specifiers import SpecifierSet
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import Annotated

from ascend_setup.dists.venv_reader import check_venv_target
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import BadInput, named_by
from ascend_setup.index.urls import index_overrides
from ascend_setup.managed.pinned import MANAGED
from ascend_setup.matrix.load import MATRIX_ENV, load_matrix, select_row
from ascend_setup.matrix.models import IndexUrl, Matrix, Row, exact_version, index_url_value
from ascend_setup.matrix.newcann import with_derived_row
from ascend_setup.matrix.soc import device_of
from ascend_setup.utils.installer_name import DEFAULT_INSTALLER, InstallerName
from ascend_setup.utils.paths import CANN_HOME, PYTHON, VENV, Flag, check_dir_path, resolve_workdir

if TYPE_CHECKING:
    from ascend_setup.matrix.derive import DerivedRow

#: What `resume` is told when a record names no installer: that install predates uv's default and ran pip.
RECORDED_BEFORE_UV = {"installer": "pip"}

#: The validation context of a record read back from state.json (see `InstallOptions.from_record`).
RECORD = "record"


def _mirror(value: object) -> str:
    return str(value) if value in ("auto", "none") else index_url_value(value)


def _index_overrides(value: object) -> object:
    """--index NAME=URL as parsed (each checked by its flag's type) -> {name: url}; a record's mapping as it is."""
    if value is None:  # the flag not given
        return {}
    return index_overrides([str(v) for v in value]) if isinstance(value, list) else value


def _none_is_empty(value: object) -> object:
    return [] if value is None else value  # a repeatable flag not given


class InstallOptions(BaseModel):
    """What an install was asked, its paths resolved (flag, variable, default): written to state.json as it
    is, and read back by `resume`, so a flag given to `install` is replayed by its resume.

    Field names are `install`'s flags (the parser's `dest`, or its alias); a new flag is a field here and its
    line in the parser. The fields a hand edit of state.json may spoil come first, so the error names them
    before any key the edit dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    cann: str
    installer: InstallerName = DEFAULT_INSTALLER
    mirror: Annotated[str, BeforeValidator(_mirror)] = "auto"
    index_url: Optional[IndexUrl] = None
    extra_index_urls: Annotated[List[IndexUrl], BeforeValidator(_none_is_empty)] = Field(
        default_factory=list, alias="extra_index_url"
    )
    indexes: Annotated[Dict[str, IndexUrl], BeforeValidator(_index_overrides)] = Field(
        default_factory=dict, alias="index"
    )
    workdir: str
    venv: str
    python: Optional[str] = None
    cann_home: Optional[str] = None
    soc: Optional[str] = None
    force: bool = False
    matrix: Optional[str] = None
    lock: Optional[str] = None  # --lock FILE: install this lock instead of resolving
    respect_pip_config: bool = False
    resume_on_login: bool = False
    vllm_ascend: Optional[str] = None  # --vllm-ascend: the row of a CANN the matrix has none for is derived from it
    jobs: Optional[int] = None  # --jobs N: MAX_JOBS for the vllm-ascend build
    build_deps_url: Optional[str] = None  # --build-deps-url URL: a mirror of the build's third-party archives
    adopt_venv: bool = False  # --adopt-venv: install into a venv ascend-setup did not make
    bundle: Optional[str] = None  # --bundle PATH: the (unpacked) offline bundle every file comes from
    python_builds: Optional[str] = None  # --python-builds FILE: pinned CPython builds instead of the packaged ones
    python_mirror: Optional[str] = None  # --python-mirror URL: tried first for a managed interpreter's archive

    @field_validator("cann")
    @classmethod
    def _recorded_cann(cls, value: str, info: ValidationInfo) -> str:
        """A recorded CANN was a row's version: one that is not a version was edited by hand. (On the command
        line a CANN without a row is answered by the matrix, with the versions it has.)"""
        return exact_version(value) if info.context == RECORD else value

    @model_validator(mode="after")
    def _one_index(self) -> InstallOptions:
        if self.index_url and self.mirror not in ("auto", "none"):
            raise BadInput(
                f"--mirror {self.mirror} and --index-url {self.index_url} both name the index: give one of them"
            )
        return self

    @classmethod
    def from_record(cls, data: Dict[str, Any]) -> InstallOptions:
        """The options a state file recorded (`record()`), checked by this model as a flag's value is; one it
        cannot read back (a key a hand edit dropped) is bad input."""
        try:
            return cls.model_validate({**RECORDED_BEFORE_UV, **data}, context=RECORD)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise BadInput(
                f"the state file's recorded option {'.'.join(str(p) for p in first['loc'])!r} cannot be used: "
                f"{first['msg']}",
                hint="start again with 'ascend-setup install' and its flags, or restore the file",
            ) from None

    def record(self) -> Dict[str, Any]:
        return self.model_dump(mode="json")

    def moved_to(self, workdir: Path) -> InstallOptions:
        """These options in `workdir` (a copied workdir resumes there, never in its original): a venv that
        lived inside the recorded workdir moves along."""
        old = Path(self.workdir)
        venv = Path(self.venv)
        if old != workdir and (venv == old / "venv" or old in venv.parents):
            venv = workdir / venv.relative_to(old)
        matrix = self.matrix
        if matrix and old != workdir and Path(matrix).parent == old:  # the derived row's matrix, recorded there
            matrix = str(workdir / Path(matrix).name)
        return self.model_copy(update={"workdir": str(workdir), "venv": str(venv), "matrix": matrix})

    def load_row(self) -> InstallRow:
        """The matrix and row these options name (a resumed install loads them here, once)."""
        return load_install_row(self)


def recorded_options(data: Dict[str, Any]) -> Dict[str, Any]:
    """The state file's check of its recorded options, kept as written: a hand-edited value fails at load, not
    inside pip. None recorded (a state made before any install ran) is left to `resume` to say so."""
    try:
        InstallOptions.model_validate({**RECORDED_BEFORE_UV, **data}, context=RECORD)
    except ValidationError as exc:  # a missing key is resume's to refuse: status still reads the steps
        wrong = [e for e in exc.errors() if e["type"] != "missing"]
        if wrong:
            raise ValidationError.from_exception_data(exc.title, wrong) from None  # type: ignore[arg-type]
    return data


def check_lock_for_host(path: str, cann: str, python_spec: Optional[str] = None, python: Optional[str] = None) -> str:
    """`--lock FILE` must be a lock of this row made for this host (arch, glibc), for a Python in the row's
    range and, with --python, for that interpreter's version; else exit 2 now."""
    from ascend_setup.host.machine import glibc_version
    from ascend_setup.resolve.lockfile import read_lock

    lock_path = Path(path).expanduser().absolute()
    lock = read_lock(lock_path)
    host = {"arch": platform.machine(), "glibc": glibc_version() or "unknown"}
    made = {"arch": lock.target.arch, "glibc": lock.target.glibc}
    if made != host:
        raise BadInput(
            f"--lock {lock_path} was made for {lock.target.arch} / glibc {lock.target.glibc}; this host is "
            f"{host['arch']} / glibc {host['glibc']}",
            hint=f"make one for this host: ascend-setup plan --cann {lock.cann} --lock FILE (run here)",
        )
    if lock.cann != cann.strip():
        raise BadInput(
            f"--lock {lock_path} is for CANN {lock.cann}, not --cann {cann}",
            hint=f"use --cann {lock.cann}, or make a lock for {cann}",
        )
    if python_spec and not SpecifierSet(python_spec).contains(lock.target.python + ".0"):
        raise BadInput(
            f"--lock {lock_path} is for Python {lock.target.python}, outside the row's range {python_spec}",
            hint=f"make it again: ascend-setup plan --cann {lock.cann} --lock FILE",
        )
    if python:
        from ascend_setup.host.interpreters import probe

        interp = probe(python)
        if interp is not None and interp.minor != lock.target.python:
            raise BadInput(
                f"--lock {lock_path} is for Python {lock.target.python}, but --python {python} is "
                f"Python {interp.minor}",
                hint=f"pass a Python {lock.target.python}, or make a lock for "
                f"{interp.minor}: ascend-setup plan --cann {lock.cann} --python {interp.minor} --lock FILE",
            )
    if lock.unavailable:
        names = ", ".join(p.name for p in lock.unavailable)
        raise BadInput(
            f"--lock {lock_path} cannot be installed: {names} had no file when it was made",
            hint="make it again where every index of the row can be reached",
        )
    return str(lock_path)


@dataclass(frozen=True)
class InstallRow:
    """The matrix an install reads (--index overrides applied; for a CANN without a row, the row derived from
    --vllm-ascend added) and its row as this host takes it: loaded once per command."""

    matrix: Matrix
    row: Row
    derived: Optional[DerivedRow] = None


def load_install_row(options: InstallOptions) -> InstallRow:
    """The options' --matrix (load_matrix reads ASCEND_SETUP_MATRIX itself, and names it in its errors); pip is
    asked for its index only when a row must be derived. Unknown index names are bad input here."""
    loaded = load_matrix(options.matrix).with_indexes(options.indexes)
    loaded, derived = with_derived_row(
        loaded,
        options.cann,
        options.vllm_ascend,
        lambda: which_index(options.index_url, options.mirror, lambda: pip_index(options.respect_pip_config)),
    )
    return InstallRow(loaded, select_row(loaded, options.cann, platform.machine()), derived)


def resolve_install(options: InstallOptions, *, dry_run: bool) -> Tuple[InstallOptions, InstallRow]:
    """The options as the install records them: every path resolved (flag, then its ASCEND_SETUP_* variable,
    then the default) and checked against the host before anything touches the disk, each error naming where
    its value came from. A dry run writes nothing, so a read-only workdir is fine for it. The matrix and row
    the checks need are returned too, for the run to use."""
    matrix, _ = Flag("--matrix", MATRIX_ENV).value(options.matrix)
    loaded = load_install_row(options)
    row = loaded.row
    if options.bundle is not None:  # before anything is touched: a bundle for another host, row or SOC is refused
        if options.lock:
            raise BadInput("--bundle and --lock both give the lock: give one (a bundle holds its own)")
        check_bundle_for_host(options.bundle, options.cann, row, options.soc, options.cann_home)
    work = resolve_workdir(options.workdir, mode="plan" if dry_run else "write")
    venv_path, venv_source = VENV.path(options.venv)
    venv_path = venv_path or Workdir(work).venv
    check_dir_path(venv_path, venv_source, mode="plan" if dry_run else "write")
    check_venv_target(venv_path, venv_source, adopt=options.adopt_venv)
    python, python_source = PYTHON.value(options.python)
    if python and python != MANAGED:
        check_python_flag(python, python_source, row.python)
    python_builds = check_python_builds(options.python_builds)
    home, home_source = CANN_HOME.path(options.cann_home)
    if home and not home.is_dir():
        raise BadInput(f"{home_source} {home} is not a directory")
    bundle, lock = options.bundle, options.lock
    if bundle is not None:
        from ascend_setup.bundle.offline import open_bundle

        root, bundle_lock = open_bundle(bundle, work, dry_run=dry_run)
        bundle, lock = (str(root) if root else None), str(bundle_lock)
    resolved = {
        "workdir": str(work),
        "venv": str(venv_path),
        "python": python,
        "cann_home": str(home) if home else None,
        "matrix": str(Path(matrix).absolute()) if matrix else None,
        "bundle": bundle,
        "lock": check_lock_for_host(lock, options.cann, row.python, python) if lock else None,
        "python_builds": python_builds,
        "resume_on_login": bool(options.resume_on_login),
    }
    recorded = options.model_dump(include=set(InstallOptions.model_fields))
    return InstallOptions.model_validate({**recorded, **resolved}), loaded


def check_bundle_for_host(path: str, cann: str, row: Row, soc: Optional[str], cann_home: Optional[str]) -> None:
    """`--bundle PATH` must be a whole bundle made for this host (arch, glibc), this row and this host's NPUs
    (--soc, else npu-smi's), whose members, lock and builds file are what they say; else exit 2 now, before
    any folder is made or anything unpacked."""
    from ascend_setup.bundle.manifest import read_manifest
    from ascend_setup.bundle.offline import check_bundle, check_contents
    from ascend_setup.host.machine import glibc_version

    given = Path(path).expanduser().absolute()
    manifest = read_manifest(given, "--bundle")
    if soc is None:
        from ascend_setup.host.npu import host_npu

        soc = host_npu(cann_home).soc_version
    check_bundle(
        manifest,
        given,
        cann=cann,
        row=row,
        arch=platform.machine(),
        glibc=glibc_version() or "unknown",
        soc=soc.strip().lower() if soc and device_of(soc) else soc,
    )
    check_contents(given, manifest)


def named_index(index_url: Optional[str], mirror: Optional[str]) -> Optional[Tuple[str, str]]:
    """(the index the install's flags name, the flag): --index-url, else a --mirror URL; None for
    `--mirror auto|none` (the mirror step ranks, or takes pip's). The one rule for "which index"."""
    if index_url:
        return index_url, "--index-url"
    if mirror and mirror not in ("auto", "none"):
        return mirror, "--mirror"
    return None


def which_index(index_url: Optional[str], mirror: Optional[str], pip_index: Callable[[], str]) -> str:
    """The index a command reads before any mirror is ranked (preflight's, plan's and doctor's, and the one a
    row for a CANN without one is derived from): the one the flags name (named_index; each was checked as its
    flag was parsed), else pip's (asked only then: `pip_index`)."""
    named = named_index(index_url, mirror)
    return named[0] if named else pip_index()


def pip_index(respect_pip_config: bool) -> str:
    """pip's configured index, as this run's pip and uv see it."""
    from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings

    return network_settings_for_this_run(pip_settings(respect=respect_pip_config)).index


def check_python_builds(given: Optional[str]) -> Optional[str]:
    """--python-builds (or its variable) as an absolute path to a valid builds file, checked now: a managed
    interpreter is chosen only at preflight, and a bad file must not wait for that."""
    from ascend_setup.managed.pinned import builds_path, load_builds

    path, source = builds_path(given)
    if source != "the packaged builds":
        with named_by(source):
            load_builds(str(path))
    return str(path) if given else None


def check_python_flag(python: str, source: str, spec: str) -> None:
    """An interpreter that exists, runs, is new enough for the row and can make venvs; else exit 2 now."""
    from ascend_setup.host.interpreters import choose_interpreter

    path = Path(python)
    if not path.exists():
        raise BadInput(f"{source} {python} does not exist")
    if path.is_dir() or not os.access(path, os.X_OK):
        raise BadInput(f"{source} {python} is not an executable file")
    with named_by(source):
        choose_interpreter(spec, python)
