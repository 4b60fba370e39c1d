"""The CLI on fake roots: `container run-command` for an A2 and an A3 host against vllm-ascend's documented
`docker run`, its runtimes and its bad input; `doctor` in a faked container, each documented mount missing in
turn named with its flag, and no container check outside one."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest
from helpers.cli import assert_one_line_error
from helpers.fake_devices import build_fake_root
from helpers.fake_dists import fake_install, make_venv
from helpers.hostile import SPECIAL, plant_special

from ascend_setup.container.facts import MOUNTS, Mount
from ascend_setup.simulate import native_stubs

#: vllm-ascend's docs' command (docs/source/quick_start.md, installation.md at 182b75ea; the research's
#: baseline), with the A2 example's 8 cards; the A3 one mounts davinci0-15.
DOCS = """docker run --rm --name vllm-ascend --shm-size=1g {devices}
--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc
-v /usr/local/dcmi:/usr/local/dcmi -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi
-v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/
-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info
-v /etc/ascend_install.info:/etc/ascend_install.info -v /root/.cache:/root/.cache -p 8000:8000 -it $IMAGE bash"""


def pairs(argv: List[str]) -> Set[Tuple[str, str]]:
    """A command's options as (flag, value) pairs; order-free, as docker reads them."""
    takes = {"--name", "--device", "-v", "-p", "-e", "--runtime", "-it"}
    out, i = set(), 0
    while i < len(argv):
        if argv[i] in takes:
            out.add((argv[i], argv[i + 1]))
            i += 2
        else:
            out.add((argv[i], ""))
            i += 1
    return out


def without_shm(found: Set[Tuple[str, str]]) -> Set[Tuple[str, str]]:
    return {p for p in found if not p[0].startswith("--shm-size=")}


def shm_gib(found: Set[Tuple[str, str]]) -> float:
    (size,) = [f.split("=")[1] for f, _ in found if f.startswith("--shm-size=")]
    return float(size.rstrip("g"))


@pytest.mark.parametrize(
    "board, cards, image",
    [("A2", 8, "quay.io/ascend/vllm-ascend:v0.23.0"), ("A3", 16, "quay.io/ascend/vllm-ascend:v0.23.0-a3")],
)
def test_run_command_is_the_docs_command_for_the_host(cli, tmp_path: Path, board: str, cards: int, image: str) -> None:
    build_fake_root(tmp_path / "root", board=board)
    proc = cli(
        "container", "run-command", "--root", str(tmp_path / "root"), "--run-root-tools", "--cache", "/root/.cache"
    )
    assert proc.returncode == 0, proc.stderr
    ours = pairs(shlex.split(proc.stdout.replace("\\\n", " ")))
    devices = " ".join(f"--device /dev/davinci{n}" for n in range(cards))
    docs = pairs(shlex.split(DOCS.format(devices=devices).replace("$IMAGE", image)))
    assert without_shm(ours) == without_shm(docs)
    assert shm_gib(ours) >= shm_gib(docs)  # the serving need, over the docs' 1g floor
    lines = proc.stdout.rstrip("\n").split(" \\\n  ")
    assert lines[0] == "docker run --rm --name vllm-ascend" and lines[-1] == f"-it {image} bash"
    assert all(len(shlex.split(line)) <= 5 for line in lines)  # one item per line
    data = json.loads(
        cli(
            "container",
            "run-command",
            "--root",
            str(tmp_path / "root"),
            "--run-root-tools",
            "--cache",
            "/root/.cache",
            "--json",
        ).stdout
    )
    assert data["device_type"] == board and data["image"] == image and data["cards"] == list(range(cards))
    assert pairs(data["argv"]) == ours and data["missing"] == [] and data["notes"] == []


def test_run_command_chosen_cards_and_runtimes(cli, home: Path, tmp_path: Path) -> None:
    build_fake_root(tmp_path / "root", board="A3")
    base = [
        "container",
        "run-command",
        "--root",
        str(tmp_path / "root"),
        "--run-root-tools",
        "--cards",
        "0,1",
        "--json",
    ]
    docker = json.loads(cli(*base).stdout)
    assert [a for a in docker["argv"] if a.startswith("/dev/davinci")] == [
        "/dev/davinci0",
        "/dev/davinci1",
        "/dev/davinci_manager",
    ]
    assert json.loads(cli(*base, "--runtime", "nerdctl").stdout)["argv"][0] == "nerdctl"
    adr = json.loads(cli(*base, "--runtime", "ascend-docker-runtime").stdout)
    assert "--device" not in adr["argv"] and "ASCEND_VISIBLE_DEVICES=0,1" in adr["argv"]
    assert ("--runtime", "ascend") in pairs(adr["argv"])
    # the runtime mounts lib64, dcmi and npu-smi itself; not version.info and ascend_install.info
    assert {v for f, v in pairs(adr["argv"]) if f == "-v"} == {
        "/usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info",
        "/etc/ascend_install.info:/etc/ascend_install.info",
        f"{home}/.cache:/root/.cache",
    }
    one = json.loads(
        cli(
            "container",
            "run-command",
            "--root",
            str(tmp_path / "root"),
            "--run-root-tools",
            "--cards",
            "3",
            "--image",
            "my/image:1",
            "--json",
        ).stdout
    )
    assert one["image"] == "my/image:1" and any("at least 2 NPUs" in n for n in one["notes"])


def test_run_command_leaves_out_what_the_host_lacks(cli, tmp_path: Path) -> None:
    build_fake_root(tmp_path / "root")
    (tmp_path / "root/etc/ascend_install.info").unlink()
    proc = cli("container", "run-command", "--root", str(tmp_path / "root"), "--run-root-tools")
    assert proc.returncode == 0 and "/etc/ascend_install.info" not in proc.stdout
    assert "note: not found on this host, left out: /etc/ascend_install.info" in proc.stderr


@pytest.mark.parametrize(
    "args, said",
    [
        (["--cards", "9"], "--cards 9: this host has no card 9 (cards: 0, 1, 2, 3, 4, 5, 6, 7)"),
        (["--cards", "0,x"], "--cards '0,x' is not a card list"),
        (["--cards", "3-1"], "runs backwards"),
        (["--runtime", "podman"], "invalid choice"),
        (["--cache", "{root}/etc/passwd"], "exists and is not a directory"),
        (["--root", "{root}/nowhere"], "is not a directory"),
    ],
)
def test_run_command_bad_input_is_one_line(cli, tmp_path: Path, args: List[str], said: str) -> None:
    build_fake_root(tmp_path / "root")
    args = [a.format(root=tmp_path / "root") for a in args]
    line = assert_one_line_error(cli("container", "run-command", "--root", str(tmp_path / "root"), *args))
    assert said in line, line


def _spied_npu_smi(root: Path) -> Path:
    """The root's npu-smi made a program that leaves a marker when run (then answers as before)."""
    tool = root / "usr/local/Ascend/driver/tools/npu-smi"
    real = tool.with_name("npu-smi.real")
    tool.rename(real)
    marker = root.parent / "npu-smi-ran"
    tool.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\nexec {shlex.quote(str(real))} \"$@\"\n")
    tool.chmod(0o755)
    return marker


@pytest.mark.parametrize(
    "extra, code", [([], 2), (["--image", "my/image:1"], 0), (["--json"], 2), (["--image", "my/image:1", "--json"], 0)]
)
def test_a_root_given_to_read_is_never_executed(cli, tmp_path: Path, extra: List[str], code: int) -> None:
    """--root is data: its npu-smi does not run (the image must then be named); the marker proves it."""
    build_fake_root(tmp_path / "root")
    marker = _spied_npu_smi(tmp_path / "root")
    proc = cli("container", "run-command", "--root", str(tmp_path / "root"), *extra)
    assert proc.returncode == code, proc.stderr
    assert not marker.exists()
    if code == 2:
        assert "--run-root-tools" in assert_one_line_error(proc)
    else:
        assert "my/image:1" in proc.stdout


def test_run_root_tools_runs_the_roots_npu_smi(cli, tmp_path: Path) -> None:
    """The explicit flag is the one way in: then the root's npu-smi names the card (the marker is real)."""
    build_fake_root(tmp_path / "root", board="A3")
    marker = _spied_npu_smi(tmp_path / "root")
    proc = cli("container", "run-command", "--root", str(tmp_path / "root"), "--run-root-tools", "--json")
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() and json.loads(proc.stdout)["device_type"] == "A3"


#: A root's (or a host's) small files that the tool reads, and the commands that read them (doctor in a
#: faked container, run-command on its root).
RUN_COMMAND = ["container", "run-command", "--image", "my/image:1", "--root"]
DOCTOR = ["doctor", "--index-url", "http://127.0.0.1:9/simple/", "--root"]
HOST_FILES = {
    "usr/local/Ascend/driver/version.info": (RUN_COMMAND, DOCTOR),
    "etc/ascend_install.info": (RUN_COMMAND,),
    "usr/local/Ascend/cann-9.1.0/{arch}-linux/ascend_toolkit_install.info": (DOCTOR,),
    "etc/passwd": (DOCTOR,),
    "proc/1/cgroup": (DOCTOR,),
}
HOSTILE_HOST_FILES = [
    pytest.param(where, how, argv, id=f"{argv[0]}:{where.split('/')[-1]}={how}")
    for where, commands in HOST_FILES.items()
    for argv in commands
    for how in SPECIAL
]


@pytest.mark.parametrize("where, how, argv", HOSTILE_HOST_FILES)
def test_a_hostile_host_file_is_bounded(cli, tmp_path: Path, where: str, how: str, argv: List[str]) -> None:
    """A link to /dev/zero, a FIFO, a file past its kind's size: each an exit 2 naming it within 30 s (a
    hang is the subprocess's timeout; 10 s was passed by doctor's start-up on a machine at load 15), never a
    MemoryError or a block."""
    import platform

    root = tmp_path / "root"
    build_fake_root(root, container=True)
    path = root / where.format(arch=platform.machine())
    path.unlink()
    plant_special(path, how)
    proc = (
        cli(
            *argv,
            str(root),
            "--cann-home",
            str(root / "usr/local/Ascend"),
            "--workdir",
            str(tmp_path / "wd"),
            "--json",
            timeout=30,
        )
        if argv is DOCTOR
        else cli(*argv, str(root), "--json", timeout=30)
    )
    line = assert_one_line_error(proc)
    assert str(path) in line and json.loads(proc.stdout)["exit"] == 2, line


#: How each documented mount goes missing from the faked container.
REMOVE: Dict[str, str] = {
    "dcmi": "usr/local/dcmi",
    "npu-smi": "usr/local/bin/npu-smi",
    "driver lib64": "usr/local/Ascend/driver/lib64/driver/libascend_hal.so",
    "version.info": "usr/local/Ascend/driver/version.info",
    "ascend_install.info": "etc/ascend_install.info",
}


def doctor(cli, root: Path, *extra: str) -> dict:
    proc = cli(
        "doctor",
        "--root",
        str(root),
        "--cann-home",
        str(root / "usr/local/Ascend"),
        "--workdir",
        str(root.parent / "wd"),
        "--index-url",
        "http://127.0.0.1:9/simple/",
        "--json",
        *extra,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return {c["id"]: c for c in json.loads(proc.stdout)["checks"]}


def test_doctor_in_a_complete_container(cli, tmp_path: Path) -> None:
    build_fake_root(tmp_path / "root", cards=2, container=True)
    found = doctor(cli, tmp_path / "root")
    container = {k: v["status"] for k, v in found.items() if k.startswith("container")}
    assert container == {
        "container": "pass",
        "container-devices": "pass",
        "container-mounts": "pass",
        "container-shm": "pass",
        "container-user": "pass",
        "container-cann-driver": "pass",
        "container-visible": "pass",
    }


@pytest.mark.parametrize("mount", MOUNTS, ids=lambda m: m.name)
def test_doctor_names_each_missing_mount_with_its_flag(cli, tmp_path: Path, mount: Mount) -> None:
    root = tmp_path / "root"
    build_fake_root(root, cards=2, container=True)
    path = root / REMOVE[mount.name]
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    check = doctor(cli, root)["container-mounts"]
    assert check["status"] == "fail" and mount.target in check["detail"]
    assert check["fix"] == f"-v {mount.target}:{mount.target}"


def test_doctor_outside_a_container_has_no_container_checks(cli, tmp_path: Path) -> None:
    build_fake_root(tmp_path / "root", cards=2)
    assert not [k for k in doctor(cli, tmp_path / "root") if k.startswith("container")]


@pytest.mark.skipif(native_stubs.compiler() is None, reason="no C compiler to build shared objects")
@pytest.mark.parametrize("driver", ["absent", "present"])
def test_doctor_names_the_driver_libraries_the_venv_needs_and_the_container_lacks(
    cli, tmp_path: Path, driver: str
) -> None:
    """A venv in the container whose extension (compiled here) NEEDs libascend_hal.so: with the driver's lib64
    not mounted, doctor names the library, its distribution and file, with the driver mount's -v line; with a
    real libascend_hal.so in lib64/driver (found through the LD_LIBRARY_PATH doctor adds), no finding."""
    root = tmp_path / "root"
    build_fake_root(root, cards=2, container=True)
    build = tmp_path / "build"
    build.mkdir()
    hal = native_stubs._compile(
        "int halGetDeviceInfo(void) { return 0; }\n", "libascend_hal.so", ["-Wl,-soname,libascend_hal.so"]
    )
    (build / "libascend_hal.so").write_bytes(hal)
    ext = native_stubs._compile(
        "int halGetDeviceInfo(void);\nint npu_ready(void) { return halGetDeviceInfo(); }\n",
        "_C.so",
        [f"-L{build}", "-lascend_hal"],
    )
    venv = make_venv(root / "opt/venv")
    fake_install(venv, "stub-npu", "1.0", files={"stub_npu/__init__.py": "", "stub_npu/_C.so": ext})
    library = root / "usr/local/Ascend/driver/lib64/driver/libascend_hal.so"
    if driver == "absent":
        library.unlink()
    else:
        library.write_bytes(hal)
    check = doctor(cli, root, "--venv", str(venv))["container-driver-libs"]
    if driver == "present":
        assert check["status"] == "pass", check
        return
    assert check["status"] == "fail", check
    assert "lacks libascend_hal.so (the driver's lib64/driver) that stub-npu 1.0's" in check["detail"]
    assert "stub_npu/_C.so needs" in check["detail"]
    assert "-v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/" in check["fix"]


@pytest.mark.skipif(native_stubs.compiler() is None, reason="no C compiler to build shared objects")
def test_a_driver_library_needed_through_cann_names_the_cann_library(tmp_path: Path) -> None:
    """The venv's extension NEEDs a toolkit library (on the environment's LD_LIBRARY_PATH, under the root) that
    NEEDs libascend_hal.so: the finding names the venv's file and the toolkit library it comes through."""
    from ascend_setup.container.inside import check_driver_libraries

    root = tmp_path / "root"
    build_fake_root(root, cards=2, container=True)
    (root / "usr/local/Ascend/driver/lib64/driver/libascend_hal.so").unlink()
    build, toolkit = tmp_path / "build", root / "opt/toolkit/lib64"
    build.mkdir()
    toolkit.mkdir(parents=True)
    (build / "libascend_hal.so").write_bytes(
        native_stubs._compile("int hal(void) { return 0; }\n", "libascend_hal.so", ["-Wl,-soname,libascend_hal.so"])
    )
    acl = native_stubs._compile(
        "int hal(void);\nint acl(void) { return hal(); }\n",
        "libascendcl.so",
        ["-Wl,-soname,libascendcl.so", f"-L{build}", "-lascend_hal"],
    )
    (toolkit / "libascendcl.so").write_bytes(acl)
    (build / "libascendcl.so").write_bytes(acl)
    ext = native_stubs._compile(
        "int acl(void);\nint ready(void) { return acl(); }\n",
        "_C.so",
        [f"-L{build}", "-lascendcl", "-Wl,--allow-shlib-undefined"],
    )
    venv = make_venv(root / "opt/venv")
    fake_install(venv, "stub-npu", "1.0", files={"stub_npu/_C.so": ext})
    check = check_driver_libraries(root, venv, {"LD_LIBRARY_PATH": "/opt/toolkit/lib64"})
    assert check is not None and check.status == "fail", check
    assert f"stub_npu/_C.so needs (through {toolkit / 'libascendcl.so'})" in check.detail
