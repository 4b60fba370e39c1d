"""What a filesystem root says about containers and the NPU: the container signals DCMI reads, the device
nodes, the driver's files and where they are, the image data. Every path is read under an injectable root, so
a test (or a look at a container's rootfs) uses a directory as `/`."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ascend_setup.errors import BadInput
from ascend_setup.host.cann import read_key_values
from ascend_setup.matrix.soc import soc_table
from ascend_setup.utils.files import read_regular_text
from ascend_setup.utils.inputs import read_host_text

DATA = Path(__file__).resolve().parent.parent / "data" / "container.yaml"
#: The nodes every NPU container needs besides its cards' /dev/davinciN (the docs' `--device` lines).
MANAGER_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
#: Words of a container runtime in /proc/1/cgroup or the root mount (DCMI's dcmi_environment_judge.c).
RUNTIME_WORDS = ("docker", "containerd", "containers", "isulad", "kubepods", "libpod", "lxc")
DEFAULT_INSTALL_PATH = "/usr/local/Ascend"
_DAVINCI = re.compile(r"^davinci(\d+)$")


class ImageData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str = Field(min_length=1)
    variants: Dict[str, str]


class ShmData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    minimum_gib: float = Field(gt=0, le=1024)
    serve_gib: float = Field(gt=0, le=1024)


class CannDriverData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1)
    minimum_driver: Dict[str, str]

    @model_validator(mode="after")
    def _versions(self) -> CannDriverData:
        for cann, driver in self.minimum_driver.items():
            if not re.fullmatch(r"\d+\.\d+", cann):
                raise ValueError(f"{cann}: a CANN release is MAJOR.MINOR")
            Version(driver)  # InvalidVersion is a ValueError: pydantic reports it
        return self


class ContainerData(BaseModel):
    """The packaged container data; every image variant names a device type the SOC table knows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1)
    image: ImageData
    shm: ShmData
    cann_driver: CannDriverData

    @model_validator(mode="after")
    def _known_devices(self) -> ContainerData:
        unknown = set(self.image.variants) - set(soc_table().devices)
        if unknown:
            raise ValueError(f"image variants for unknown device types: {', '.join(sorted(unknown))}")
        return self


@lru_cache(maxsize=1)
def container_data() -> ContainerData:
    return ContainerData.model_validate(yaml.safe_load(read_regular_text(DATA)))


def under(root: Path, path: str) -> Path:
    """`path` (absolute, as the host or container names it) inside `root`."""
    return root / path.lstrip("/")


def _read(path: Path) -> str:
    """A root's file through the gate ("" when it is not there): a FIFO or a device in a root is bad input."""
    return read_host_text(path, "host-file") or ""


def container_signals(root: Path) -> List[str]:
    """Why `root` looks like a container's, as DCMI decides it: /.dockerenv, podman's /run/.containerenv, a
    runtime's name in /proc/1/cgroup, an overlay root from a runtime's store in /proc/self/mountinfo."""
    found = [f"/{p}" for p in (".dockerenv", "run/.containerenv") if under(root, p).exists()]
    cgroup = _read(under(root, "proc/1/cgroup"))
    words = sorted({w for w in RUNTIME_WORDS if w in cgroup})
    if words:
        found.append(f"/proc/1/cgroup names {', '.join(words)}")
    for line in _read(under(root, "proc/self/mountinfo")).splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/" and " - overlay " in line and any(w in line for w in RUNTIME_WORDS):
            found.append("/ is an overlay from a container runtime's store")
            break
    return found


def davinci_nodes(root: Path) -> List[int]:
    """The card numbers N of root/dev/davinciN (any type: the checks say which are not devices)."""
    try:
        names = os.listdir(under(root, "dev"))
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(_DAVINCI.match, names) if m)


def is_char_device(path: Path) -> bool:
    """A character device, through links (a test's link to /dev/null stands for a mounted node)."""
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class Mount:
    """A host file the container needs, at the path the image expects it (the docs' `-v` target)."""

    name: str
    target: str

    def present(self, root: Path) -> bool:
        """Whether it is there under `root`, seen from inside the container (lib64 must hold the HAL)."""
        if self.name == "driver lib64":
            return any(under(root, f"{self.target}{d}libascend_hal.so").exists() for d in ("", "driver/"))
        return under(root, self.target).exists()


#: The driver's files every vllm-ascend container mounts (docs' `docker run`), in the docs' order.
VERSION_INFO = Mount("version.info", f"{DEFAULT_INSTALL_PATH}/driver/version.info")
DRIVER_LIB64 = Mount("driver lib64", f"{DEFAULT_INSTALL_PATH}/driver/lib64/")
MOUNTS = (
    Mount("dcmi", "/usr/local/dcmi"),
    Mount("npu-smi", "/usr/local/bin/npu-smi"),
    DRIVER_LIB64,
    VERSION_INFO,
    Mount("ascend_install.info", "/etc/ascend_install.info"),
)


def host_driver_dir(root: Path) -> str:
    """The driver's directory on this host: under the install path /etc/ascend_install.info names
    (Driver_Install_Path_Param), else the standard one."""
    install = read_key_values(under(root, "etc/ascend_install.info")).get("Driver_Install_Path_Param")
    return f"{(install or DEFAULT_INSTALL_PATH).rstrip('/')}/driver"


def host_source(root: Path, mount: Mount) -> Optional[str]:
    """Where `mount` is on this host, found rather than assumed: the driver's files in host_driver_dir,
    npu-smi in /usr/local/bin, /usr/local/sbin (some SKUs) or the driver's tools."""
    driver = host_driver_dir(root)
    candidates = {
        "npu-smi": ["/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi", f"{driver}/tools/npu-smi"],
        "driver lib64": [f"{driver}/lib64/"],
        "version.info": [f"{driver}/version.info"],
    }.get(mount.name, [mount.target])
    return next((c for c in candidates if Mount(mount.name, c).present(root)), None)


def driver_version(root: Path, version_info: str = VERSION_INFO.target) -> Optional[str]:
    """The driver's version from its version.info (by default, mounted where the image reads it)."""
    return read_key_values(under(root, version_info)).get("Version")


def shm_bytes(root: Path) -> Optional[int]:
    try:
        st = os.statvfs(under(root, "dev/shm"))
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def parse_cards(text: str, what: str) -> List[int]:
    """A card list as the runtimes write it: '0,1', '0-2,4'. Anything else is bad input naming `what`."""
    cards: List[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d{1,4})\s*(?:-\s*(\d{1,4})\s*)?", part)
        if not m:
            raise BadInput(f"{what} {text!r} is not a card list", hint="write it as 0,1 or 0-3")
        low, high = int(m.group(1)), int(m.group(2) or m.group(1))
        if high < low:
            raise BadInput(f"{what} {text!r}: the range {part.strip()} runs backwards", hint="write it as 0-3")
        cards += [c for c in range(low, high + 1) if c not in cards]
    return cards


def minimum_driver(cann: str) -> Optional[str]:
    """The lowest driver a CANN version's release (MAJOR.MINOR) supports; None when the data has none."""
    m = re.match(r"(\d+)\.(\d+)", cann)
    key = f"{int(m.group(1))}.{int(m.group(2))}" if m else cann
    return container_data().cann_driver.minimum_driver.get(key)


def driver_at_least(driver: str, minimum: str) -> Optional[bool]:
    """None when the driver's version cannot be read as one."""
    try:
        return Version(driver) >= Version(minimum)
    except InvalidVersion:
        return None


@dataclass
class PasswdEntry:
    name: str
    uid: int
    gid: int


def passwd_entry(root: Path, uid: int) -> Optional[PasswdEntry]:
    """The uid's line in root/etc/passwd (the file, not NSS: what the image's HCCL sees)."""
    for line in _read(under(root, "etc/passwd")).splitlines():
        f = line.split(":")
        if len(f) >= 4 and f[2].isdigit() and int(f[2]) == uid:
            return PasswdEntry(f[0], uid, int(f[3]) if f[3].isdigit() else -1)
    return None


def group_entry(root: Path, name: str) -> Optional[Tuple[int, List[str]]]:
    """(gid, members) of a group in root/etc/group."""
    for line in _read(under(root, "etc/group")).splitlines():
        f = line.split(":")
        if len(f) >= 4 and f[0] == name and f[2].isdigit():
            return int(f[2]), [m for m in f[3].split(",") if m]
    return None
