"""The install options: checked once, recorded in state.json, replayed by `resume`."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Literal, Optional, Tuple
from urllib.parse import urlparse

from packaging.specifiers import SpecifierSet
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from typing_extensions import Annotated

from ascend_setup.dists.venv_reader import check_venv_target
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import BadInput, named_by
from ascend_setup.index.urls import is_index_url
from ascend_setup.managed.pinned import MANAGED
from ascend_setup.matrix.load import MATRIX_ENV, load_matrix, select_row
from ascend_setup.matrix.models import ExactVersion, IndexUrl, Matrix, Row, index_url_value
from ascend_setup.matrix.newcann import with_derived_row
from ascend_setup.matrix.soc import device_of, label, parse_device, soc_table
from ascend_setup.utils.paths import CANN_HOME, PYTHON, VENV, Flag, check_dir_path, resolve_workdir

if TYPE_CHECKING:
    from ascend_setup.matrix.derive import DerivedRow

INSTALLERS = ("pip", "uv")


def check_index_url(url: str, flag: str) -> str:
    """An index URL must be http(s) or file; anything else is bad input now, not a pip error later."""
    if not is_index_url(url):
        raise BadInput(f"{flag} {url!r} is not an http(s):// or file:// URL")
    return url.rstrip("/") + "/" if urlparse(url).scheme != "file" else url


def _soc_examples() -> str:
    return ", ".join(f"{d.example} ({d.cards})" for d in soc_table().devices.values())


def check_soc(soc: Optional[str]) -> Optional[str]:
    """--soc as the build takes it (lower case): a SOC_VERSION vllm-ascend's build accepts, or bad input now."""
    if soc is None:
        return None
    if device_of(soc) is None:
        raise BadInput(f"--soc {soc!r} is not a SOC_VERSION vllm-ascend knows; e.g. {_soc_examples()}")
    return soc.strip().lower()


def check_device(value: str) -> str:
    """`plan --soc`: a device type (A2, A3, 310P, A5) or a SOC_VERSION -> the device type it builds for."""
    device = parse_device(value) or device_of(value)
    if device is None:
        raise BadInput(
            f"--soc {value!r} is neither a device type ({', '.join(label(d) for d in soc_table().devices)})"
            f" nor a SOC_VERSION vllm-ascend knows; e.g. {_soc_examples()}"
        )
    return device


def parse_index_overrides(values: List[str]) -> Dict[str, str]:
    """`--index NAME=URL` (repeatable) -> {name: url}; the names are checked against the matrix later."""
    found: Dict[str, str] = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name.strip() or not url.strip():
            raise BadInput(f"--index {value!r} is not NAME=URL (e.g. --index ascend=https://my.mirror/simple)")
        url = check_index_url(url.strip(), f"--index {name.strip()}=")
        if found.get(name.strip(), url) != url:
            raise BadInput(
                f"--index {name.strip()}= is given twice with different URLs ({found[name.strip()]} and "
                f"{url}): give one"
            )
        found[name.strip()] = url
    return found


#: The default before uv's: a recorded install that does not name its installer resumes with it, unchanged.
LEGACY_INSTALLER = "pip"


@dataclass
class InstallOptions:
    cann: str
    workdir: str
    venv: str
    python: Optional[str] = None
    cann_home: Optional[str] = None
    index_url: Optional[str] = None
    extra_index_urls: List[str] = field(default_factory=list)
    mirror: str = "auto"
    installer: str = "uv"
    soc: Optional[str] = None
    force: bool = False
    matrix: Optional[str] = None
    indexes: Dict[str, str] = field(default_factory=dict)  # --index NAME=URL
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

    def to_record(self) -> Dict[str, Any]:
        return asdict(self)

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
        return InstallOptions(**{**self.to_record(), "workdir": str(workdir), "venv": str(venv), "matrix": matrix})

    def load_row(self) -> InstallRow:
        """The matrix and row these options name (a resumed install loads them here, once)."""
        return load_install_row(
            cann=self.cann,
            matrix=self.matrix,
            indexes=self.indexes,
            vllm_ascend=self.vllm_ascend,
            index_url=self.index_url,
            mirror=self.mirror,
            respect_pip_config=self.respect_pip_config,
        )

    @classmethod
    def from_record(cls, data: Dict[str, Any]) -> InstallOptions:
        """The options a state file recorded, each of the right type (a hand-edited file is bad input)."""
        from pydantic import TypeAdapter, ValidationError

        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known.setdefault("installer", LEGACY_INSTALLER)  # a record without the key predates the uv default
        try:
            return TypeAdapter(cls).validate_python(known)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise BadInput(
                f"the state file's recorded option {where!r} cannot be used: {first['msg']}",
                hint="start again with 'ascend-setup install' and its flags, or restore the file",
            ) from None


def _mirror(value: object) -> str:
    return str(value) if value in ("auto", "none") else index_url_value(value)


class _RecordedOptions(BaseModel):
    """The recorded options whose values are more than strings (the rest are checked as flags on replay)."""

    model_config = ConfigDict(extra="ignore")

    cann: Optional[ExactVersion] = None
    installer: Optional[Literal["pip", "uv"]] = None
    mirror: Optional[Annotated[str, BeforeValidator(_mirror)]] = None
    index_url: Optional[IndexUrl] = None
    extra_index_urls: List[IndexUrl] = Field(default_factory=list)
    indexes: Dict[str, IndexUrl] = Field(default_factory=dict)


def check_recorded_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """`resume` replays these: a hand-edited installer or index must fail at load, not inside pip."""
    return {**options, **_RecordedOptions.model_validate(options).model_dump(exclude_unset=True)}


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


def load_install_row(
    *,
    cann: str,
    matrix: Optional[str],
    indexes: Dict[str, str],
    vllm_ascend: Optional[str],
    index_url: Optional[str],
    mirror: Optional[str],
    respect_pip_config: bool,
) -> InstallRow:
    """`matrix` is --matrix (load_matrix reads ASCEND_SETUP_MATRIX itself, and names it in its errors); pip is
    asked for its index only when a row must be derived. Unknown index names are bad input here."""
    loaded = load_matrix(matrix).with_indexes(indexes)
    loaded, derived = with_derived_row(
        loaded, cann, vllm_ascend, lambda: which_index(index_url, mirror, lambda: pip_index(respect_pip_config))
    )
    return InstallRow(loaded, select_row(loaded, cann, platform.machine()), derived)


def build_install_options(
    *,
    cann: str,
    workdir: Optional[str],
    venv: Optional[str],
    python: Optional[str],
    cann_home: Optional[str],
    index_url: Optional[str],
    extra_index_urls: List[str],
    mirror: Optional[str],
    installer: str,
    soc: Optional[str],
    force: bool,
    matrix: Optional[str],
    indexes: Optional[List[str]] = None,
    lock: Optional[str] = None,
    respect_pip_config: bool = False,
    dry_run: bool = False,
    resume_on_login: bool = False,
    vllm_ascend: Optional[str] = None,
    jobs: Optional[int] = None,
    build_deps_url: Optional[str] = None,
    adopt_venv: bool = False,
    bundle: Optional[str] = None,
    python_builds: Optional[str] = None,
    python_mirror: Optional[str] = None,
) -> Tuple[InstallOptions, InstallRow]:
    """Check every flag (and its ASCEND_SETUP_* variable) before anything touches the disk. Each error
    names where the value came from. A dry run writes nothing, so a read-only workdir is fine for it.
    The matrix and row the checks need are returned with the options, for the run to use."""
    flag_matrix = matrix
    matrix, _ = Flag("--matrix", MATRIX_ENV).value(matrix)
    if index_url and mirror and mirror not in ("auto", "none"):
        raise BadInput(f"--mirror {mirror} and --index-url {index_url} both name the index: give one of them")
    overrides = parse_index_overrides(indexes or [])
    loaded = load_install_row(
        cann=cann,
        matrix=flag_matrix,
        indexes=overrides,
        vllm_ascend=vllm_ascend,
        index_url=index_url,
        mirror=mirror,
        respect_pip_config=respect_pip_config,
    )
    row = loaded.row
    if bundle is not None:  # before anything is touched: a bundle for another host, row or SOC is refused
        if lock:
            raise BadInput("--bundle and --lock both give the lock: give one (a bundle holds its own)")
        check_bundle_for_host(bundle, cann, row, soc, cann_home)
    work = resolve_workdir(workdir, mode="plan" if dry_run else "write")
    venv_path, venv_source = VENV.path(venv)
    venv_path = venv_path or Workdir(work).venv
    check_dir_path(venv_path, venv_source, mode="plan" if dry_run else "write")
    check_venv_target(venv_path, venv_source, adopt=adopt_venv)
    python, python_source = PYTHON.value(python)
    if python and python != MANAGED:
        check_python_flag(python, python_source, row.python)
    python_builds = check_python_builds(python_builds)
    python_mirror = check_python_mirror(python_mirror)
    home, home_source = CANN_HOME.path(cann_home)
    if home and not home.is_dir():
        raise BadInput(f"{home_source} {home} is not a directory")
    if installer not in INSTALLERS:
        raise BadInput(f"--installer must be one of {', '.join(INSTALLERS)}, not {installer!r}")
    mirror = mirror or "auto"
    if mirror not in ("auto", "none"):
        mirror = check_index_url(mirror, "--mirror")
    if bundle is not None:
        from ascend_setup.bundle.offline import open_bundle

        root, bundle_lock = open_bundle(bundle, work, dry_run=dry_run)
        bundle, lock = (str(root) if root else None), str(bundle_lock)
    lock = check_lock_for_host(lock, cann, row.python, python) if lock else None
    return InstallOptions(
        cann=cann,
        workdir=str(work),
        venv=str(venv_path),
        python=python,
        cann_home=str(home) if home else None,
        index_url=check_index_url(index_url, "--index-url") if index_url else None,
        extra_index_urls=[check_index_url(u, "--extra-index-url") for u in extra_index_urls],
        mirror=mirror,
        installer=installer,
        soc=check_soc(soc),
        force=force,
        matrix=str(Path(matrix).absolute()) if matrix else None,
        indexes=overrides,
        lock=lock,
        respect_pip_config=respect_pip_config,
        resume_on_login=resume_on_login,
        vllm_ascend=vllm_ascend,
        jobs=check_jobs(jobs),
        build_deps_url=check_build_deps_url(build_deps_url),
        adopt_venv=adopt_venv,
        bundle=bundle,
        python_builds=python_builds,
        python_mirror=python_mirror,
    ), loaded


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
        soc=check_soc(soc) if soc and device_of(soc) else soc,
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
    row for a CANN without one is derived from): the one the flags name (named_index), checked, else pip's
    (asked only then: `pip_index`)."""
    named = named_index(index_url, mirror)
    return check_index_url(*named) if named else pip_index()


def pip_index(respect_pip_config: bool) -> str:
    """pip's configured index, as this run's pip and uv see it."""
    from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings

    return network_settings_for_this_run(pip_settings(respect=respect_pip_config)).index


def check_build_deps_url(url: Optional[str]) -> Optional[str]:
    if url is not None and (urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc):
        raise BadInput(
            f"--build-deps-url {url!r} is not an http(s):// URL",
            hint="for files on this host, copy them into <workdir>/downloads/third-party",
        )
    return url


def check_jobs(jobs: Optional[int]) -> Optional[int]:
    if jobs is not None and jobs < 1:
        raise BadInput(f"--jobs {jobs} must be at least 1")
    return jobs


def check_python_mirror(url: Optional[str]) -> Optional[str]:
    """--python-mirror: an http(s) URL (the tool downloads the archive itself, with HTTP Range)."""
    if url is not None and (urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc):
        raise BadInput(
            f"--python-mirror {url!r} is not an http(s):// URL",
            hint="a copy of the python-build-standalone releases, laid out as URL/<build>/<file>",
        )
    return url


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
