"""The device type decides vllm-ascend's wheel: SOC names as upstream maps them, npu-smi read as upstream
reads it, the published wheel's `_build_info.py` read by range requests, plan --soc, audit's rule, and the
source build's toolchain checks (all at once)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import stat
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.fake_dists import fake_install, make_venv

from ascend_setup.audit.findings import run_audit
from ascend_setup.host.npu import npu_facts, parse_chips, soc_from_board
from ascend_setup.host.toolchain import builds_from_source, lock_tool_checks, package_manager, toolchain_checks
from ascend_setup.index.metadata import wheel_member
from ascend_setup.index.simple import SimpleIndex
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.derive import wheel_devices
from ascend_setup.matrix.soc import BUILD_INFO, build_info_device, device_of, label, parse_device, soc_table
from ascend_setup.simulate.dists import build_wheel
from ascend_setup.simulate.ecosystem import PLUGIN_REQUIRES, stub_versions
from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.index_server import LocalIndex

MATRIX = load_matrix()
ROW = MATRIX.rows["9.1.0"]

#: vllm-ascend 0.23.0's setup.py, gen_build_info's soc_to_device, entry by entry (read from the sdist).
UPSTREAM_SOC_TO_DEVICE = [
    ("910b", "A2"),
    ("910c", "A3"),
    ("310p", "_310P"),
    ("ascend910b1", "A2"),
    ("ascend910b2", "A2"),
    ("ascend910b2c", "A2"),
    ("ascend910b3", "A2"),
    ("ascend910b4", "A2"),
    ("ascend910b4-1", "A2"),
    ("ascend910_9391", "A3"),
    ("ascend910_9381", "A3"),
    ("ascend910_9372", "A3"),
    ("ascend910_9392", "A3"),
    ("ascend910_9382", "A3"),
    ("ascend910_9362", "A3"),
    ("ascend310p1", "_310P"),
    ("ascend310p3", "_310P"),
    ("ascend310p5", "_310P"),
    ("ascend310p7", "_310P"),
    ("ascend310p3vir01", "_310P"),
    ("ascend310p3vir02", "_310P"),
    ("ascend310p3vir04", "_310P"),
    ("ascend310p3vir08", "_310P"),
]


@pytest.mark.parametrize("soc, device", UPSTREAM_SOC_TO_DEVICE)
def test_every_upstream_soc_maps_to_its_device(soc: str, device: str) -> None:
    assert device_of(soc) == device
    assert device_of(soc.upper()) == device  # --soc is taken in any case


def test_the_table_has_exactly_upstreams_entries() -> None:
    assert dict(soc_table().socs) == dict(UPSTREAM_SOC_TO_DEVICE)


@pytest.mark.parametrize("soc", ["ascend950_pr", "ascend950dt_9591", "xascend950"])
def test_any_soc_containing_ascend950_is_a5(soc: str) -> None:
    assert device_of(soc) == "A5"  # upstream: `"ascend950" in soc_version`


@pytest.mark.parametrize("soc", ["ascend910", "ascenda2g3", "ascend910b5", "ascend310", ""])
def test_upstream_refuses_these(soc: str) -> None:
    assert device_of(soc) is None


def test_device_names_and_labels() -> None:
    assert [parse_device(n) for n in ("A2", "a3", "310P", "_310p", "A5", "A4")] == [
        "A2",
        "A3",
        "_310P",
        "_310P",
        "A5",
        None,
    ]
    assert label("_310P") == "310P" and label(None) == "?"


@pytest.mark.parametrize(
    "board, soc",
    [
        ({"Chip Type": "Ascend", "Chip Name": "910B3"}, "ascend910b3"),  # A2
        ({"Chip Type": "Ascend", "Chip Name": "910B4-1"}, "ascend910b4-1"),
        ({"Chip Name": "Ascend910", "NPU Name": "9391"}, "ascend910_9391"),  # A3: no Chip Type, an NPU Name
        ({"Chip Type": "Ascend", "Chip Name": "310P3"}, "ascend310p3"),
        ({"Chip Name": "Ascend950", "NPU Name": "PR"}, "ascend950_pr"),  # A5
        ({"Chip Type": "Ascend", "Chip Name": "A2G3"}, "ascend910b1"),  # the CH HDK's A2 boards
        ({"Chip Type": "Ascend", "Chip Name": "Unknown9"}, None),
    ],
)
def test_soc_from_board_as_upstream(board, soc) -> None:
    assert soc_from_board(board) == soc


def test_a_910b4_1_row_of_npu_smi_info_is_read() -> None:
    text = (
        "| 0     910B4-1             | OK            | 93.6        40                0    / 0             |\n"
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          3396 / 65536         |\n"
    )
    assert parse_chips(text) == [{"npu": "0", "name": "910B4-1"}]


@pytest.mark.parametrize(
    "board, soc, device",
    [
        ("A2", "ascend910b3", "A2"),
        ("A3", "ascend910_9391", "A3"),
        ("310P", "ascend310p3", "_310P"),
        ("A5", "ascend950_pr", "A5"),
    ],
)
def test_fake_npu_smi_per_board(tmp_path: Path, board: str, soc: str, device: str) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", board=board)
    facts = npu_facts(str(fake.driver))
    assert (facts.error, facts.soc_version, facts.device_type) == (None, soc, device)


def test_build_info_as_the_worker_reads_it() -> None:
    assert build_info_device("# Auto-generated file\n__device_type__ = 'A3'\n") == "A3"
    assert build_info_device("__soc_version__ = 'ascend310p1'\n__sleep_mode_enabled__ = True\n") == "_310P"
    assert build_info_device("__soc_version__ = 'ascend910b1'\n") == "A2"
    assert build_info_device("import os\nos.system('boom')\n") == "A2"  # read, never run


def test_bad_soc_is_one_line_and_exit_2(cli) -> None:
    for command in (
        ["doctor", "--soc", "ascend910x"],
        ["plan", "--cann", "9.1.0", "--soc", "A4"],
        ["audit", "--venv", "/nonexistent", "--soc", "ascend9999"],
    ):
        line = assert_one_line_error(cli(*command))
        assert "--soc" in line


# -- the published wheel, on a real index over HTTP -----------------------------------------------------


def test_wheel_member_is_a_range_read(indexes, tmp_path: Path) -> None:
    main = indexes[0]
    wheels = [f for f in SimpleIndex(main.url).project("vllm-ascend").files if f.kind == "wheel"]
    devices, problems = wheel_devices(wheels)
    assert devices == {"vllm-ascend": {"aarch64": "A2", "x86_64": "A2"}} and problems == []
    assert wheel_member(wheels[0], "vllm_ascend/nothing_here.py").text is None
    # a wheel of 8 MB whose _build_info.py is its first member, as far from the zip's directory as it gets
    big = LocalIndex()
    try:
        build_wheel(
            tmp_path / "big",
            "vllm-ascend",
            "0.23.0",
            tag="cp311-cp311-manylinux_2_34_x86_64",
            files={
                "vllm_ascend/_build_info.py": "__device_type__ = 'A2'\n",
                "vllm_ascend/vllm_ascend_C.so": os.urandom(8 * 1024 * 1024),
            },
        )
        big.add_dir(tmp_path / "big")
        (wheel,) = SimpleIndex(big.url).project("vllm-ascend").files
        read = wheel_member(wheel, BUILD_INFO)
        assert read.text is not None and build_info_device(read.text) == "A2"
        assert read.size > 8_000_000 and 0 < read.fetched < read.size / 20 and read.requests >= 2
    finally:
        big.close()


def _plan(cli, indexes, *extra):
    main, asc, torch_cpu, _ = indexes
    proc = cli(
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        "2.35",
        "--arch",
        "x86_64",
        "--python",
        "3.11",
        "--index-url",
        main.url,
        "--index",
        f"ascend={asc.url}",
        "--index",
        f"pytorch-cpu={torch_cpu.url}",
        *extra,
    )
    return proc


def test_plan_takes_the_a2_wheel_only_for_a2(cli, indexes) -> None:
    default = json.loads(_plan(cli, indexes, "--json").stdout)
    plugin = next(p for p in default["packages"] if p["name"] == "vllm-ascend")
    assert plugin["outcome"] == "wheel" and default["target"]["device"] == "A2"
    a3 = json.loads(_plan(cli, indexes, "--json", "--soc", "A3").stdout)
    plugin = next(p for p in a3["packages"] if p["name"] == "vllm-ascend")
    assert plugin["outcome"] == "sdist" and plugin["file"].endswith(".tar.gz")
    assert "built for A2" in plugin["reason"] and "A3" in plugin["reason"]
    assert a3["target"]["device"] == "A3"
    by_soc = json.loads(_plan(cli, indexes, "--json", "--soc", "ascend310p3").stdout)
    assert next(p for p in by_soc["packages"] if p["name"] == "vllm-ascend")["outcome"] == "sdist"
    text = _plan(cli, indexes, "--soc", "A3").stdout
    assert "A3 NPUs" in text and "built from source for A3" in text


# -- audit and verify --------------------------------------------------------------------------------


def _venv_with_plugin(path: Path, device: str) -> Path:
    row = ROW.for_arch(platform.machine())
    make_venv(path)
    versions = stub_versions(dict(row.packages), dict(row.cann_python_deps))
    fake_install(
        path,
        "vllm-ascend",
        versions["vllm-ascend"],
        requires=PLUGIN_REQUIRES,
        files={"vllm_ascend/__init__.py": "", "vllm_ascend/_build_info.py": f"__device_type__ = '{device}'\n"},
    )
    return path


def test_audit_catches_an_a2_wheel_on_an_a3_host(cli, tmp_path: Path) -> None:
    venv = _venv_with_plugin(tmp_path / "v", "A2")
    found = [f for f in run_audit(MATRIX, venv, "9.1.0", soc="ascend910_9391").findings if f.id == "device-type"]
    assert len(found) == 1 and found[0].severity == "error"
    assert "built for A2" in found[0].message and "A3" in found[0].message
    assert "--soc ascend910_9391" in found[0].fix and "_build_info.py" in found[0].evidence
    assert not [f for f in run_audit(MATRIX, venv, "9.1.0", soc="ascend910b3").findings if f.id == "device-type"]
    assert not [f for f in run_audit(MATRIX, venv, "9.1.0").findings if f.id == "device-type"]  # no NPU known
    # the CLI asks npu-smi: a fake CANN whose npu-smi says A3
    fake = build_fake_cann(tmp_path / "Ascend", board="A3")
    proc = cli(
        "audit", "--venv", str(venv), "--cann", "9.1.0", "--json", env={"ASCEND_SETUP_CANN_HOME": str(fake.root)}
    )
    assert proc.returncode == 1
    assert "device-type" in {f["id"] for f in json.loads(proc.stdout)["findings"]}


# -- the toolchain ----------------------------------------------------------------------------------


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_every_missing_piece_at_once(tmp_path: Path) -> None:
    """gcc 7.3 (as openEuler 20.03 ships), no g++, a toolkit without bisheng or setenv.bash, setuptools 65."""
    fake = build_fake_cann(tmp_path / "Ascend", toolchain=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "gcc", "#!/bin/sh\necho 7.3.0\n")
    checks = toolchain_checks(
        ROW,
        toolkit=fake.toolkit,
        arch="aarch64",
        env={"PATH": str(bin_dir)},
        pins={"cmake": "3.25.0", "setuptools": "65.5.0"},
        backend="setuptools.build_meta",
        release={"ID": "openEuler", "VERSION_ID": "20.03"},
    )
    failed = {c.id: c for c in checks if not c.ok}
    assert set(failed) == {"gcc", "g++", "bisheng", "setenv.bash", "cmake", "setuptools"}
    assert "7.3.0" in failed["gcc"].detail and "yum install" in (failed["gcc"].fix or "")
    assert "67.1" in failed["setuptools"].detail


def test_a_good_toolchain_passes_and_fixes_name_the_os(tmp_path: Path) -> None:
    if not (shutil.which("gcc") and shutil.which("g++")):
        pytest.skip("no gcc/g++ on this machine")
    fake = build_fake_cann(tmp_path / "Ascend")
    checks = toolchain_checks(
        ROW,
        toolkit=fake.toolkit,
        arch="x86_64",
        pins={"cmake": "4.1.0", "setuptools": "80.9.0"},
        backend="setuptools.build_meta",
    )
    assert all(c.ok for c in checks), [c.detail for c in checks if not c.ok]
    assert any(c.id == "g++" and "C++17" in c.detail for c in checks)
    assert package_manager({"ID": "ubuntu", "ID_LIKE": "debian"}) == "apt"
    assert package_manager({"ID": "kylin"}) == "yum" and package_manager({"ID": "alpine"}) is None


def test_a_cxx_compiler_without_cxx17_fails(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "gcc", "#!/bin/sh\necho 9.4.0\n")
    # a g++ that reports 9.4.0 and rejects -std=c++17, as a misconfigured toolchain would
    _script(
        bin_dir / "g++",
        "#!/bin/sh\ncase \"$*\" in *-dump*) echo 9.4.0;; *) echo \"unrecognized command line "
        "option '-std=c++17'\" >&2; exit 1;; esac\n",
    )
    checks = {
        c.id: c
        for c in toolchain_checks(
            ROW, toolkit=None, arch="x86_64", env={"PATH": str(bin_dir)}, release={"ID": "ubuntu"}
        )
    }
    assert checks["gcc"].ok and not checks["c++17"].ok and "apt-get" in (checks["c++17"].fix or "")


def test_setuptools_is_checked_only_when_it_builds_the_sdist() -> None:
    assert [c.id for c in lock_tool_checks({"cmake": "3.30.0", "setuptools": "65.5.0"}, "_backend")] == ["cmake"]
    checks = lock_tool_checks({"cmake": "3.30.0", "setuptools": "65.5.0"}, "setuptools.build_meta")
    assert [(c.id, c.ok) for c in checks] == [("cmake", True), ("setuptools", False)]
    assert not lock_tool_checks({}, None)[0].ok  # no cmake in the lock


def test_source_build_forecast_by_the_row() -> None:
    row = ROW.for_arch("aarch64")
    assert builds_from_source(row, "aarch64", "2.35", "A2") is None
    assert builds_from_source(row, "aarch64", "2.35", None) is None
    assert "A3" in (builds_from_source(row, "aarch64", "2.35", "A3") or "")
    assert "glibc 2.34" in (builds_from_source(row, "aarch64", "2.31", "A2") or "")


# -- live: the real published wheel ---------------------------------------------------------------------


@pytest.mark.live
def test_live_the_published_0_23_0_wheels_say_a2_by_range_reads(cli) -> None:
    """`_build_info.py` of the real wheels, one per architecture, with a small share of each wheel read;
    then `matrix derive` records it as the row's wheel_device."""
    from ascend_setup.index.pipconfig import pip_settings

    index = pip_settings().index
    files = [f for f in SimpleIndex(index).project("vllm-ascend").files if str(f.version) == "0.23.0"]
    for arch in ("aarch64", "x86_64"):
        wheel = next(f for f in files if f.kind == "wheel" and f.filename.endswith(f"_{arch}.whl"))
        read = wheel_member(wheel, BUILD_INFO)
        print(
            f"{wheel.filename}: {read.fetched} of {read.size} bytes ({100 * read.fetched / read.size:.2f}%), "
            f"{read.requests} range requests: {read.text!r}"
        )
        assert read.text is not None and build_info_device(read.text) == "A2"
        assert read.size > 10_000_000 and read.fetched < read.size / 20
    proc = cli(
        "matrix", "derive", "--vllm-ascend", "0.23.0", "--cann", "9.1.0", "--index-url", index, "--json", timeout=300
    )
    data = json.loads(proc.stdout)
    assert data["row"]["wheel_device"] == {"vllm-ascend": {"aarch64": "A2", "x86_64": "A2"}}
    assert data["row"]["wheel_device"] == {n: dict(v) for n, v in ROW.wheel_device.items()}


def test_verify_names_a_build_for_another_device_type(tmp_path: Path) -> None:
    from helpers.session import session_for

    from ascend_setup.steps.outputs import HostFacts
    from ascend_setup.steps.verify import device_problem

    venv = _venv_with_plugin(tmp_path / "v", "A2")
    on_a3 = session_for(tmp_path, venv=str(venv), soc="ascend910_9392")
    problem = device_problem(on_a3) or ""
    assert "built for A2 NPUs" in problem and "this host's are A3" in problem and "_build_info.py" in problem
    facts = HostFacts(
        python="python3",
        python_version="3.11.7",
        cann_version="9.1.0",
        cann_toolkit="",
        cann_root="",
        arch="aarch64",
        soc="ascend910b2c",
    )
    assert device_problem(session_for(tmp_path, {"preflight": facts}, venv=str(venv))) is None
    assert device_problem(session_for(tmp_path, venv=str(venv))) is None  # no NPU known


def test_a_lock_for_a2_is_refused_on_an_a3_host() -> None:
    from ascend_setup.errors import StepFailed
    from ascend_setup.resolve.lockfile import Lock, LockedPackage, LockTarget
    from ascend_setup.steps.resolve import check_lock_device

    def lock(outcome: str) -> Lock:
        return Lock(
            cann="9.1.0",
            target=LockTarget(arch="aarch64", glibc="2.35", python="3.11", device="A2"),
            indexes={"mirror": "http://127.0.0.1:9/simple/"},
            extra_index_urls=[],
            inputs="x",
            packages=[LockedPackage(name="vllm-ascend", version="0.23.0", outcome=outcome, index="mirror")],
            warnings=[],
        )

    with pytest.raises(StepFailed) as caught:
        check_lock_device(lock("wheel"), "A3")
    assert "made for A2 NPUs" in caught.value.message and "--soc A3" in (caught.value.hint or "")
    check_lock_device(lock("wheel"), "A2")
    check_lock_device(lock("sdist"), "A3")  # it builds from source: fine anywhere
    check_lock_device(lock("wheel"), None)
