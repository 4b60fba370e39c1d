"""What each install step records when it finishes, as typed models (stored in state.json under the same keys
the dict-shaped outputs of earlier releases used, so their state files still resume)."""

from __future__ import annotations

from typing import List, Optional

from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.dists.installers import Indexes
from ascend_setup.host.machine import GLIBC_FLOOR
from ascend_setup.index.tags import Target


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore")  # a key a later release added is not this one's concern


class HostFacts(_Output):
    """preflight: the host as the install targets it."""

    python: str  # the interpreter the venv is made from
    python_version: str  # its full version (3.11.7)
    managed: Optional[str] = None  # the pinned build (uv's key) the python step installs there; None: the host's
    cann_version: str
    cann_toolkit: str
    cann_root: str
    set_env: List[str] = Field(default_factory=list)  # CANN's (and NNAL's) set_env.sh
    glibc: Optional[str] = None  # None: not a glibc system, or it could not be read
    arch: str
    cpus: Optional[int] = None
    mem_total: Optional[int] = None
    soc: Optional[str] = None  # SOC_VERSION: --soc's, else npu-smi's
    npu_error: Optional[str] = None
    device_type: Optional[str] = None
    source_build: Optional[str] = None  # why vllm-ascend would be built from source (None: a wheel fits)
    max_jobs: Optional[str] = None

    @property
    def python_minor(self) -> str:
        """X.Y of the interpreter: what wheel tags, locks and venvs are keyed by."""
        return ".".join(self.python_version.split(".")[:2])

    @property
    def target(self) -> Target:
        """This host as a wheel target (a glibc that cannot be read counts as the manylinux floor)."""
        return Target(glibc=self.glibc or GLIBC_FLOOR, arch=self.arch, python=self.python_minor)


class MirrorChoice(_Output):
    """mirror: the index the install downloads from, and the other fresh mirrors a download fails over to."""

    index_url: str
    extra_index_urls: List[str] = Field(default_factory=list)
    source: str = ""  # why this index (--index-url, --mirror, pip's configuration, the fastest fresh mirror)
    fallbacks: List[str] = Field(default_factory=list)

    @property
    def indexes(self) -> Indexes:
        return Indexes(self.index_url, tuple(self.extra_index_urls))


class LockRef(_Output):
    """resolve: where the lock of this install is (None in a record of a lock found already there)."""

    lock: Optional[str] = None
    packages: Optional[int] = None
    source: Optional[str] = None  # "resolved", or the --lock FILE it copied


class ManagedPython(_Output):
    """python: the managed interpreter, when preflight chose one (else nothing was installed)."""

    python: Optional[str] = None
    version: Optional[str] = None
    archive: Optional[str] = None  # the checked archive it was unpacked from


class VenvMade(_Output):
    pip: Optional[str] = None


class SliceInstalled(_Output):
    """A package step: the requirements (name==version) of its slice, as installed."""

    installed: List[str] = Field(default_factory=list)


class TritonSwapped(_Output):
    removed_upstream_triton: bool = False


class PluginInstalled(_Output):
    source: Optional[str] = None  # wheel | built
    file: Optional[str] = None
    reason: Optional[str] = None  # why it was built


class Verified(_Output):
    shell: List[str] = Field(default_factory=list)
    hints: List[str] = Field(default_factory=list)
