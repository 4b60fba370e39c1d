"""A fake Ascend host (or container) filesystem under a directory used as `/`: device nodes, the driver's
files where the docs' `docker run` mounts them from, users, and the container markers DCMI reads.

Unprivileged tests cannot mknod, so a present device node is a link to /dev/null (a character device
through the link), a wrong one a plain file, a missing one absent."""

from __future__ import annotations

import os
from pathlib import Path

from ascend_setup.simulate.fake_cann import FakeCann, _write, build_fake_cann

#: How many cards each board's host has (the docs' A2 example mounts davinci0-7, A3 davinci0-15).
CARDS = {"A2": 8, "A3": 16, "310P": 4, "A5": 8}


def fake_node(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/dev/null", path)


def build_fake_root(root: Path, *, board: str = "A2", cards: int = 0, container: bool = False) -> FakeCann:
    """A host root with `cards` NPUs (default: the board's count) and the driver under /usr/local/Ascend;
    `container`: the markers a container has (/.dockerenv, a docker cgroup) and an image's users."""
    fake = build_fake_cann(root / "usr/local/Ascend", board=board)
    for n in range(cards or CARDS[board]):
        fake_node(root / f"dev/davinci{n}")
    for name in ("davinci_manager", "devmm_svm", "hisi_hdc"):
        fake_node(root / "dev" / name)
    (root / "dev/shm").mkdir(parents=True)
    _write(root / "usr/local/Ascend/driver/lib64/driver/libascend_hal.so", "")
    _write(root / "usr/local/dcmi/dcmi_interface_api.h", "")
    (root / "usr/local/bin").mkdir(parents=True)
    os.symlink("../Ascend/driver/tools/npu-smi", root / "usr/local/bin/npu-smi")
    _write(
        root / "etc/ascend_install.info",
        "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Path_Param=/usr/local/Ascend\n",
    )
    _write(root / "etc/passwd", "root:x:0:0:root:/root:/bin/bash\nHwHiAiUser:x:1000:1000::/home/HwHiAiUser:/bin/bash\n")
    _write(root / "etc/group", "root:x:0:\nHwHiAiUser:x:1000:\n")
    if container:
        _write(root / ".dockerenv", "")
        _write(root / "proc/1/cgroup", "0::/system.slice/docker-4f2a9c.scope\n")
    return fake
