"""The install session: everything a step of the install may read, each of one type. The options as checked,
the matrix and its row, pip's settings, the workdir's paths, the typed outputs of the steps that finished,
and what a run computes once (the lock, CANN's environment)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Type, TypeVar

from pydantic import BaseModel

from ascend_setup.dists.installers import Indexes, Installer, installer_for
from ascend_setup.dists.venv_reader import venv_python
from ascend_setup.engine.session import Session
from ascend_setup.engine.state import StateStore
from ascend_setup.engine.workdir import Workdir
from ascend_setup.host.setenv import capture_env
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.tags import Target
from ascend_setup.managed.pinned import PythonBuilds, load_builds
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.matrix.soc import device_of
from ascend_setup.resolve.index_session import IndexSession
from ascend_setup.resolve.lockfile import Lock, read_lock
from ascend_setup.steps.options import InstallOptions, recorded_options
from ascend_setup.steps.outputs import HostFacts, LockRef, MirrorChoice
from ascend_setup.utils.paths import cache_dir

if TYPE_CHECKING:  # the bundle's reader (and its HTTP and archive stacks) is imported by an install from one
    from ascend_setup.bundle.offline import Bundle

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def _given(value: Optional[T], name: str) -> T:
    """`value`, which a whole run always has; the AttributeError its use on None would have raised otherwise."""
    if value is None:
        raise AttributeError(f"this install session has no {name}")
    return value


def install_store(workdir: Workdir) -> StateStore:
    """The workdir's state file, as install, resume, status and doctor read it."""
    return StateStore(
        workdir.state,
        format="ascend-setup-state",
        writer="ascend-setup",
        check_options=recorded_options,
        elsewhere="pass another --workdir",
    )


def _required() -> InstallOptions:
    """A dataclass field with no value to default to, after the base's defaulted fields: 3.8 has no kw_only."""
    raise TypeError("InstallSession() needs options=")


@dataclass
class InstallSession(Session):
    """One install run. `files` is its Workdir; `index` the run's IndexSession, which the preflight's Python
    choice, the resolve step's gate and closure and the dry run's preview share. The matrix, row and pip
    settings are None only in tests of a single step's check."""

    options: InstallOptions = field(default_factory=_required)
    matrix: Optional[Matrix] = None
    row: Optional[Row] = None
    pip_settings: Optional[PipSettings] = None
    index: Optional[IndexSession] = None  # made from pip_settings when not given: one per run
    _lock: Optional[Lock] = field(default=None, repr=False)
    _lock_path: Optional[str] = field(default=None, repr=False)
    _cann_env: Optional[Dict[str, str]] = field(default=None, repr=False)
    _cann_env_read: bool = field(default=False, repr=False)
    lock_fetched: bool = field(default=False, repr=False)  # every file of the lock is in the workdir's downloads

    def __post_init__(self) -> None:
        if self.index is None and self.pip_settings is not None:
            bundle = self.bundle
            if bundle is None:
                self.index = IndexSession(self.pip_settings)
            else:  # every index URL of the bundle's lock is answered by the bundle, never by the network
                from ascend_setup.bundle.offline import bundle_pages

                self.index = IndexSession(self.pip_settings, pages=bundle_pages(bundle, read_lock(bundle.lock_path)))

    def python_builds(self) -> PythonBuilds:
        """The pinned CPython builds a managed interpreter is chosen from: --python-builds (or its variable),
        else the bundle's (the pin it was made with), else the packaged ones."""
        given = self.options.python_builds
        bundled = self.bundle.python_builds if self.bundle is not None else None
        return load_builds(given if given or bundled is None else str(bundled))

    @property
    def bundle(self) -> Optional[Bundle]:
        """The offline bundle this install takes every file from (--bundle), or None."""
        from ascend_setup.bundle.offline import Bundle

        return Bundle(Path(self.options.bundle)) if self.options.bundle else None

    @property
    def workdir(self) -> Workdir:
        assert isinstance(self.files, Workdir)
        return self.files

    # -- what a run always has (None only in tests of a single step's check): the step that needs one says so
    @property
    def the_matrix(self) -> Matrix:
        return _given(self.matrix, "matrix")

    @property
    def the_row(self) -> Row:
        return _given(self.row, "row")

    @property
    def the_pip_settings(self) -> PipSettings:
        return _given(self.pip_settings, "pip_settings")

    @property
    def the_index(self) -> IndexSession:
        return _given(self.index, "index")

    def find(self, model: Type[M]) -> Optional[M]:
        """The one finished step's output of this type (HostFacts, MirrorChoice, LockRef), or None."""
        return next((o for o in self.outputs.values() if isinstance(o, model)), None)

    # -- the venv ------------------------------------------------------------------------------
    @property
    def venv(self) -> Path:
        return Path(self.options.venv)

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return venv_python(self.venv)

    # -- the host, as preflight found it ---------------------------------------------------------
    @property
    def facts(self) -> HostFacts:
        facts = self.find(HostFacts)
        if facts is None:
            raise KeyError("preflight has not run")
        return facts

    @property
    def target(self) -> Target:
        return self.facts.target

    @property
    def soc(self) -> Optional[str]:
        """The SOC_VERSION this install builds for: --soc's, else npu-smi's (preflight's); None when unknown."""
        facts = self.find(HostFacts)
        return self.options.soc or (facts.soc if facts else None)

    @property
    def device(self) -> Optional[str]:
        """The NPU device type this install builds for (A2, A3, ...), from `soc`."""
        return device_of(self.soc)

    # -- indexes, installer, lock ----------------------------------------------------------------
    @property
    def indexes(self) -> Indexes:
        """The mirror step's choice (recorded in state, so a resumed run uses the same index)."""
        choice = self.find(MirrorChoice)
        return choice.indexes if choice else Indexes("", ())

    def installer(self) -> Installer:
        """The run's installer (`--installer`)."""
        return installer_for(self.options.installer, self.the_pip_settings, cache_dir() / "uv")

    def venv_installer(self) -> Installer:
        """uv, whatever `--installer` says, for the venv's own slice (pip itself): the venv is made without pip,
        and a pip that upgrades itself and is killed half-way cannot run again; uv runs from its own binary."""
        return installer_for("uv", self.the_pip_settings, cache_dir() / "uv")

    def lock(self) -> Optional[Lock]:
        """The lock the resolve step wrote (None before it ran), read once per run."""
        ref = self.find(LockRef)
        path = ref.lock if ref else None
        if not path or not Path(path).is_file():
            return None
        if self._lock is None or self._lock_path != path:
            self._lock, self._lock_path = read_lock(Path(path)), path
        return self._lock

    def cann_env(self) -> Dict[str, str]:
        """os.environ plus what CANN's (and NNAL's) set_env.sh export, captured once per run."""
        if not self._cann_env_read:
            facts = self.find(HostFacts)
            scripts = [Path(p) for p in facts.set_env] if facts else []
            self._cann_env = capture_env(scripts).apply() if scripts else None
            self._cann_env_read = True
        return dict(os.environ) if self._cann_env is None else dict(self._cann_env)
