"""doctor's container checks, in process, on fake roots (a temp dir as `/`): the signals DCMI reads, each
documented mount and device node missing in turn (named with its flag), /dev/shm, the user, the image's
CANN against the host's driver, the visible-device variables; and where run-command finds the host's files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest
from helpers.fake_devices import build_fake_root
from pydantic import ValidationError

from ascend_setup.container.facts import (
    MOUNTS,
    CannDriverData,
    Mount,
    container_data,
    container_signals,
    host_source,
    parse_cards,
)
from ascend_setup.container.inside import container_checks
from ascend_setup.container.run_command import choose_cards
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.host.checks import Check

CHIPS = [{"npu": "0", "name": "910B3"}, {"npu": "1", "name": "910B3"}]
GIB = 1024**3


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A complete container of an A2 host with two cards."""
    build_fake_root(tmp_path / "root", cards=2, container=True)
    return tmp_path / "root"


def checks(root: Path, *, uid: int = 0, cann: str = "9.1.0", env: Optional[Dict[str, str]] = None) -> Dict[str, Check]:
    return {c.id: c for c in container_checks(root, chips=CHIPS, cann=cann, env=env or {}, uid=uid)}


def test_a_complete_container_passes(root: Path) -> None:
    found = checks(root)
    assert [c.id for c in found.values() if not c.ok] == [], found
    assert "/.dockerenv" in found["container"].detail and "docker" in found["container"].detail


def test_no_container_no_checks(tmp_path: Path) -> None:
    build_fake_root(tmp_path / "host", cards=2)
    assert container_signals(tmp_path / "host") == []
    assert checks(tmp_path / "host") == {}


@pytest.mark.parametrize(
    "marker, text, said",
    [
        (".dockerenv", "", "/.dockerenv"),
        ("run/.containerenv", "", "/run/.containerenv"),
        ("proc/1/cgroup", "12:devices:/kubepods/burstable/pod1\n", "kubepods"),
        (
            "proc/self/mountinfo",
            "600 500 0:52 / / rw - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A\n",
            "overlay",
        ),
    ],
)
def test_each_signal_alone_says_container(tmp_path: Path, marker: str, text: str, said: str) -> None:
    (tmp_path / marker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / marker).write_text(text)
    assert said in " ".join(container_signals(tmp_path))


def test_a_host_cgroup_is_no_container(tmp_path: Path) -> None:
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/init.scope\n")
    assert container_signals(tmp_path) == []


#: How each documented mount goes missing from a container.
REMOVE: Dict[str, Callable[[Path], None]] = {
    "dcmi": lambda r: shutil.rmtree(r / "usr/local/dcmi"),
    "npu-smi": lambda r: (r / "usr/local/bin/npu-smi").unlink(),
    "driver lib64": lambda r: (r / "usr/local/Ascend/driver/lib64/driver/libascend_hal.so").unlink(),
    "version.info": lambda r: (r / "usr/local/Ascend/driver/version.info").unlink(),
    "ascend_install.info": lambda r: (r / "etc/ascend_install.info").unlink(),
}


def test_every_documented_mount_has_a_removal() -> None:
    assert sorted(REMOVE) == sorted(m.name for m in MOUNTS)


@pytest.mark.parametrize("mount", MOUNTS, ids=lambda m: m.name)
def test_each_missing_mount_is_named_with_its_flag(root: Path, mount: Mount) -> None:
    REMOVE[mount.name](root)
    check = checks(root)["container-mounts"]
    assert check.status == "fail" and f"{mount.name} ({mount.target})" in check.detail
    assert check.fix == f"-v {mount.target}:{mount.target}"


@pytest.mark.parametrize("node", ["davinci0", "davinci1", "davinci_manager", "devmm_svm", "hisi_hdc"])
@pytest.mark.parametrize("how", ["missing", "plain file"])
def test_each_bad_device_node_is_named_with_its_flag(root: Path, node: str, how: str) -> None:
    path = root / "dev" / node
    path.unlink()
    if how == "plain file":
        path.write_text("")
    check = checks(root)["container-devices"]
    assert (
        check.status == "fail"
        and f"/dev/{node} is {'missing' if how == 'missing' else 'not a device node'}" in check.detail
    ), check
    assert f"--device /dev/{node}" in (check.fix or "")


def test_no_card_at_all(root: Path) -> None:
    """npu-smi fails too when no card is mounted: no NPU list to name the nodes by."""
    for n in (0, 1):
        (root / f"dev/davinci{n}").unlink()
    check = {c.id: c for c in container_checks(root, chips=[], cann="9.1.0", env={}, uid=0)}["container-devices"]
    assert check.status == "fail" and "the container has no NPU" in check.detail
    assert (check.fix or "").startswith("--device /dev/davinci0")


def test_cards_the_driver_reports_against_the_nodes(root: Path) -> None:
    os.symlink("/dev/null", root / "dev/davinci2")
    check = checks(root)["container-devices"]
    assert check.status == "warn" and "the driver reports 2 NPU(s), the container has nodes for 3" in check.detail


@pytest.mark.parametrize("size_gib, status", [(0.0625, "fail"), (4, "warn"), (16, "pass"), (64, "pass")])
def test_shm_against_the_serving_need(
    root: Path, monkeypatch: pytest.MonkeyPatch, size_gib: float, status: str
) -> None:
    real = os.statvfs
    seen: List[str] = []

    class Fake:
        f_frsize = 4096
        f_blocks = int(size_gib * GIB / 4096)

    def statvfs(path):  # type: ignore[no-untyped-def]
        if str(path).endswith("dev/shm"):
            seen.append(str(path))
            return Fake()
        return real(path)

    monkeypatch.setattr(os, "statvfs", statvfs)
    check = checks(root)["container-shm"]
    assert seen == [str(root / "dev/shm")]
    assert check.status == status, check
    if status != "pass":
        assert check.fix and check.fix.startswith(f"--shm-size={container_data().shm.serve_gib:g}g")


def test_shm_missing(root: Path) -> None:
    (root / "dev/shm").rmdir()
    assert checks(root)["container-shm"].status == "fail"


@pytest.mark.parametrize(
    "uid, status, said",
    [
        (0, "pass", "root"),
        (1000, "pass", "HwHiAiUser (uid 1000) is in HwHiAiUser"),
        (1234, "fail", "uid 1234 has no entry in the image's /etc/passwd"),
        (1001, "fail", "vllm (uid 1001) is not in the HwHiAiUser group"),
    ],
)
def test_the_user(root: Path, uid: int, status: str, said: str) -> None:
    with open(root / "etc/passwd", "a") as passwd:
        passwd.write("vllm:x:1001:1001::/home/vllm:/bin/bash\n")
    check = checks(root, uid=uid)["container-user"]
    assert check.status == status and said in check.detail, check


def test_a_user_listed_in_the_group_passes(root: Path) -> None:
    with open(root / "etc/passwd", "a") as passwd:
        passwd.write("vllm:x:1001:1001::/home/vllm:/bin/bash\n")
    (root / "etc/group").write_text("HwHiAiUser:x:1000:vllm\n")
    assert checks(root, uid=1001)["container-user"].status == "pass"


@pytest.mark.parametrize(
    "driver, cann, status",
    [
        ("25.2.0", "9.1.0", "pass"),
        ("24.1.rc3", "9.1.0", "fail"),
        ("25.3.0", "9.2.0", "pass"),
        ("25.2.0", "9.2.0", "fail"),
        ("25.2.0", "7.0.0", "warn"),
        ("garbled", "9.1.0", "warn"),
    ],
)
def test_image_cann_against_host_driver(root: Path, driver: str, cann: str, status: str) -> None:
    (root / "usr/local/Ascend/driver/version.info").write_text(f"Version={driver}\n")
    check = checks(root, cann=cann)["container-cann-driver"]
    assert check.status == status, check
    if status == "fail":
        assert f"the host has {driver}" in check.detail and "upgrade the host's driver" in (check.fix or "")


def test_no_cann_in_the_image_is_a_warning(root: Path) -> None:
    found = {c.id: c for c in container_checks(root, chips=CHIPS, cann=None, env={}, uid=0)}
    assert found["container-cann-driver"].status == "warn"


@pytest.mark.parametrize(
    "env, status, said",
    [
        ({}, "pass", "no visible-device variable set"),
        ({"ASCEND_RT_VISIBLE_DEVICES": "0,1"}, "pass", "ASCEND_RT_VISIBLE_DEVICES=0,1"),
        ({"ASCEND_RT_VISIBLE_DEVICES": "4"}, "fail", "sees 2 card(s), numbered from 0"),
        ({"ASCEND_VISIBLE_DEVICES": "0-1"}, "pass", "ASCEND_VISIBLE_DEVICES=0-1"),
        ({"ASCEND_VISIBLE_DEVICES": "6,7"}, "fail", "no node for"),
        ({"ASCEND_RT_VISIBLE_DEVICES": "a"}, "fail", "is not a card list"),
    ],
)
def test_visible_device_variables(root: Path, env: Dict[str, str], status: str, said: str) -> None:
    check = checks(root, env=env)["container-visible"]
    assert check.status == status and said in check.detail, check
    if said == "no node for":
        assert check.fix == "--device /dev/davinci6 --device /dev/davinci7"
    if said.startswith("sees"):
        assert "ASCEND_RT_VISIBLE_DEVICES=0,1" in (check.fix or "")


@pytest.mark.parametrize("text, cards", [("0", [0]), ("0,1", [0, 1]), ("0-2,4", [0, 1, 2, 4]), (" 1 , 1 ", [1])])
def test_card_lists(text: str, cards: List[int]) -> None:
    assert parse_cards(text, "--cards") == cards


@pytest.mark.parametrize("text", ["", "a", "0,", "3-1", "0;1", "-1", "12345"])
def test_bad_card_lists(text: str) -> None:
    with pytest.raises(BadInput):
        parse_cards(text, "--cards")


def test_cards_are_the_hosts(tmp_path: Path) -> None:
    build_fake_root(tmp_path, cards=2)
    assert choose_cards(tmp_path, None) == [0, 1]
    with pytest.raises(BadInput, match="no card 5"):
        choose_cards(tmp_path, "0,5")
    with pytest.raises(AscendSetupError, match="no /dev/davinciN"):
        choose_cards(tmp_path / "usr", None)


def test_host_files_are_found_where_the_host_has_them(tmp_path: Path) -> None:
    """A driver installed under /opt/Ascend (ascend_install.info says so), npu-smi in /usr/local/sbin."""
    build_fake_root(tmp_path, cards=2)
    (tmp_path / "opt").mkdir()
    (tmp_path / "usr/local/Ascend").rename(tmp_path / "opt/Ascend")
    (tmp_path / "etc/ascend_install.info").write_text("Driver_Install_Path_Param=/opt/Ascend\n")
    (tmp_path / "usr/local/bin/npu-smi").unlink()
    (tmp_path / "usr/local/sbin").mkdir()
    (tmp_path / "usr/local/sbin/npu-smi").write_text("")
    found = {m.name: host_source(tmp_path, m) for m in MOUNTS}
    assert found == {
        "dcmi": "/usr/local/dcmi",
        "npu-smi": "/usr/local/sbin/npu-smi",
        "driver lib64": "/opt/Ascend/driver/lib64/",
        "version.info": "/opt/Ascend/driver/version.info",
        "ascend_install.info": "/etc/ascend_install.info",
    }


def test_the_data_is_validated() -> None:
    assert set(container_data().image.variants) == {"A2", "A3", "_310P", "A5"}
    with pytest.raises(ValidationError):
        CannDriverData(source="x", minimum_driver={"9.1.0": "25.2.0"})
    with pytest.raises(ValidationError):
        CannDriverData(source="x", minimum_driver={"9.1": "not a version"})
