"""Host facts and CANN detection against fake trees of both layouts, hostile scripts included."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.host.cann import detect_cann, primary_cann, same_cann
from ascend_setup.host.interpreters import choose_interpreter, find_interpreters, probe
from ascend_setup.host.machine import glibc_version, machine_facts, usable_cpus
from ascend_setup.host.npu import Clock, card_clocks, npu_facts, parse_board, parse_common, soc_from_board
from ascend_setup.host.setenv import capture_env
from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.sourcebuild.kernel_meta import find_kernel_meta_locks, sweep_kernel_meta_locks

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland


def test_machine_facts(tmp_path: Path) -> None:
    facts = machine_facts(tmp_path / "not-yet" / "workdir")
    assert facts.glibc == platform.libc_ver()[1]
    assert facts.arch == platform.machine()
    assert facts.cpus == len(os.sched_getaffinity(0)) == usable_cpus()
    assert facts.mem_total > 0 and facts.workdir_free > 0
    assert facts.workdir_persistent is False
    assert glibc_version() and glibc_version().count(".") == 1


def test_interpreters_found_and_chosen() -> None:
    found = find_interpreters([sys.executable])
    me = probe(sys.executable)
    assert me is not None and me.version == "%d.%d.%d" % sys.version_info[:3]
    assert any(i.version == me.version for i in found)
    chosen = choose_interpreter(f"=={me.minor}.*", found=found)
    assert chosen.minor == me.minor
    with pytest.raises(AscendSetupError) as err:
        choose_interpreter(">=3.99", found=found)
    assert "no Python interpreter in >=3.99" in err.value.message and "--python" in err.value.hint
    with pytest.raises(BadInput):
        choose_interpreter(">=3.99", explicit=sys.executable)


@pytest.mark.parametrize("layout", ["9.x", "8.x"])
def test_detects_both_layouts(tmp_path: Path, layout: str) -> None:
    version = "9.1.0" if layout == "9.x" else "8.0.0"
    fake = build_fake_cann(tmp_path / "Ascend", layout=layout, version=version)
    found = primary_cann(str(fake.root))
    assert found is not None
    assert found.version == version and found.layout.startswith(layout)
    assert Path(found.toolkit) == fake.toolkit.resolve()
    assert found.set_env is not None and Path(found.set_env).resolve() == fake.set_env.resolve()
    assert found.nnal and found.nnal.libatb.endswith("libatb.so")
    assert found.driver and found.driver.package_version == "25.2.0"
    assert found.kernels == ["ascend910b"]


def test_version_cfg_fallback_and_beta_strings(tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "A", layout="8.x", version="8.0.RC1", install_info=False)
    assert primary_cann(str(fake.root)).version == "8.0.RC1"
    beta = build_fake_cann(tmp_path / "B", version="9.2.0-beta.2")
    assert primary_cann(str(beta.root)).version == "9.2.0-beta.2"
    assert same_cann("9.2.0-beta.2", "9.2.0b2") and same_cann("8.0.RC1", "8.0.rc1")
    assert not same_cann("9.1.0", "9.0.1") and not same_cann(None, "9.1.0")


def test_found_through_env_vars_and_toolkit_paths(tmp_path: Path, monkeypatch) -> None:
    fake = build_fake_cann(tmp_path / "home" / "developer" / "Ascend")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(fake.toolkit))
    assert primary_cann().version == "9.1.0"
    monkeypatch.delenv("ASCEND_HOME_PATH")
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(fake.root / "ascend-toolkit" / "latest"))
    assert primary_cann().root == str(fake.root)
    assert primary_cann(str(fake.toolkit)).version == "9.1.0"  # --cann-home may name the toolkit itself


def test_absent_cann(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert detect_cann(str(empty)) == []
    with pytest.raises(BadInput):
        detect_cann(str(tmp_path / "missing"))


def test_hostile_set_env_kills_a_strict_caller(tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "Ascend")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    proc = subprocess.run(
        ["bash", "-c", f"set -eu; source {fake.set_env}; echo survived"], capture_output=True, text=True, env=env
    )
    assert proc.returncode != 0 and "survived" not in proc.stdout


@pytest.mark.parametrize("mode", ["hostile", "exit", "nounset"])
def test_capture_survives_hostile_scripts(tmp_path: Path, mode: str) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", set_env_mode=mode)
    base = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    base["SHELLOPTS"] = "errexit:nounset"  # the caller's options must not matter
    captured = capture_env(primary_cann(str(fake.root)).set_env_scripts(), base=base)
    assert captured.changes["ASCEND_HOME_PATH"] == str(fake.toolkit)
    assert f"{fake.toolkit}/lib64:" in captured.changes["LD_LIBRARY_PATH"]
    assert captured.changes["FAKE_CANN_AFTER_FAILURE"] == "1"
    assert "ATB_HOME_PATH" in captured.changes or mode != "hostile"
    assert "Welcome" in captured.output
    expected_problem = {"hostile": "set_env.sh returns 1", "exit": "calls exit", "nounset": "calls exit"}[mode]
    assert any(expected_problem in p for p in captured.problems()), captured.problems()
    env = captured.apply(base)
    assert env["PATH"].startswith(f"{fake.toolkit}/bin:")


def test_capture_hang_and_missing_script(tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", set_env_mode="hang")
    with pytest.raises(AscendSetupError) as err:
        capture_env([fake.set_env], timeout=1.5)
    assert "did not finish within 2 s" in err.value.message
    with pytest.raises(AscendSetupError) as err:
        capture_env([tmp_path / "nope.sh"])
    assert str(tmp_path / "nope.sh") in err.value.message
    unreadable = tmp_path / "secret.sh"
    unreadable.write_text("export A=1\n")
    unreadable.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(AscendSetupError):
            capture_env([unreadable])


def test_npu_smi_needs_driver_libs_and_gives_soc(tmp_path: Path, monkeypatch) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", chip="910B3")
    monkeypatch.setenv("PATH", os.environ["PATH"])
    bare = subprocess.run(
        [str(fake.driver / "tools" / "npu-smi"), "info"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert bare.returncode == 127 and "libc_sec.so" in bare.stderr
    facts = npu_facts(str(fake.driver))
    assert facts.error is None
    assert [c["name"] for c in facts.chips] == ["910B3", "910B3"]
    assert facts.soc_version == "ascend910b3"


def test_soc_rules() -> None:
    assert soc_from_board({"Chip Type": "Ascend", "Chip Name": "910B1"}) == "ascend910b1"
    assert soc_from_board({"Chip Type": "Ascend", "Chip Name": "310P3"}) == "ascend310p3"
    assert soc_from_board({"Chip Type": "Ascend", "Chip Name": "910", "NPU Name": "9391"}) == "ascend910_9391"
    assert soc_from_board({}) is None
    assert parse_board("   Chip Name    : 910B4\n")["Chip Name"] == "910B4"


def test_a3_soc_from_fake_board(tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", chip="910", npu_name="9391")
    assert npu_facts(str(fake.driver)).soc_version == "ascend910_9391"


def test_no_npu_smi(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    facts = npu_facts(str(tmp_path / "no-driver"))
    if facts.npu_smi is None:
        assert "npu-smi not found" in facts.error


def test_stale_lock_sweep_touches_only_dead_exact_locks(tmp_path: Path) -> None:
    tree = tmp_path / "build"
    meta = tree / "op" / "kernel_meta"
    meta.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (meta / "kernel_meta.lock").write_text(f"{dead.pid}\n")
    (tree / "kernel_meta.lock").write_text(f"{os.getpid()}\n")  # alive: ours
    (meta / "other.lock").write_text("not a pid")
    innocent = [
        tree / "vllm_ascend" / "worker" / "block_table.py",
        tree / "csrc" / "transpose_kv_cache_by_block.cpp",
        tree / "poetry.lock",
        tree / "deadlock.txt",
    ]
    for path in innocent:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{dead.pid}\n")
    locks = {l.path.name + ("@meta" if l.path.parent == meta else ""): l for l in find_kernel_meta_locks(tree)}
    assert set(locks) == {"kernel_meta.lock@meta", "kernel_meta.lock", "other.lock@meta"}
    removed = sweep_kernel_meta_locks(tree)
    assert [l.path for l in removed] == [meta / "kernel_meta.lock"]
    assert (tree / "kernel_meta.lock").exists() and (meta / "other.lock").exists()
    assert all(p.exists() for p in innocent)


def test_hwhiaiuser_group_needed_for_non_root() -> None:
    import grp
    import pwd

    from ascend_setup.host.npu import missing_hwhiaiuser_group

    assert missing_hwhiaiuser_group(0) is False
    nobody = pwd.getpwnam("nobody").pw_uid
    try:
        grp.getgrnam("HwHiAiUser")
    except KeyError:
        assert missing_hwhiaiuser_group(nobody) is True  # no such group on this machine at all


def _fake_python(path: Path, version: str, calls: Path) -> None:
    path.write_text(
        f"#!/bin/sh\necho run >> {calls}\n"
        f"echo '{{\"version\": \"{version}\", \"venv\": true, \"executable\": \"{path}\"}}'\n"
    )
    path.chmod(0o755)


def test_an_interpreter_is_asked_once_until_its_file_changes(tmp_path: Path) -> None:
    """probe's memo (an install asks the same interpreter three times): the same file is run once; a file
    rewritten in place, or a link pointed at another, is asked again, and a failed run is never remembered."""
    calls = tmp_path / "calls"
    python = tmp_path / "python3.11"
    _fake_python(python, "3.11.7", calls)
    assert probe(str(python)).version == probe(str(python)).version == "3.11.7"
    assert calls.read_text().count("run") == 1
    _fake_python(python, "3.11.9", calls)  # same path, same size, another answer
    assert probe(str(python)).version == "3.11.9"
    other = tmp_path / "python3.12"
    _fake_python(other, "3.12.4", calls)
    link = tmp_path / "python3"
    link.symlink_to(python)
    assert probe(str(link)).version == "3.11.9"
    link.unlink()
    link.symlink_to(other)
    assert probe(str(link)).version == "3.12.4"
    broken = tmp_path / "python3.10"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    assert probe(str(broken)) is None
    _fake_python(broken, "3.10.14", calls)
    assert probe(str(broken)).version == "3.10.14"


#: Huawei's npu-smi reference, "Querying Common Information": an idle card, its clock dropped (1650 rated, 100 now).
COMMON_IDLE = """NPU ID                         : 0
Memory Usage Rate(%)           : 0
HBM Usage Rate(%)              : 3
Aicore Usage Rate(%)           : 0
Aicore Freq(MHZ)               : 1650
Aicore curFreq(MHZ)            : 100
Aicore Count                   : 32
Temperature(C)                 : 65
NPU Real-time Power(W)         : 298.6
"""


def test_the_ai_core_clock_is_read_from_npu_smis_common_query() -> None:
    assert parse_common(COMMON_IDLE) == Clock(1650.0, 100.0, 0.0)
    assert parse_common("NPU ID : 0\nAicore Freq(MHZ) : NA\n") == Clock(None, None, None)


def test_the_fake_npu_smi_prints_the_clock_fields_and_a_test_sets_them(tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "Ascend")
    assert card_clocks(str(fake.driver), [0]) == {0: Clock(1800.0, 1800.0, 0.0)}
    (fake.driver / "npu-clocks").write_text("1 1800 1200 85\n")
    assert card_clocks(str(fake.driver), [0, 1]) == {0: Clock(1800.0, 1800.0, 0.0), 1: Clock(1800.0, 1200.0, 85.0)}
