"""`ascend-setup doctor` against fake CANN trees and against this bare machine."""

from __future__ import annotations

import json
import subprocess
import sys
import venv as venv_module
from pathlib import Path

import pytest

from ascend_setup.host.doctor_checks import check_glibc, check_locks, check_venv
from ascend_setup.host.machine import machine_facts
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.simulate.fake_cann import build_fake_cann


def _checks(data: dict) -> dict:
    return {c["id"]: c for c in data["checks"]}


@pytest.mark.parametrize("layout, version", [("9.x", "9.1.0"), ("8.x", "9.0.0")])
def test_doctor_json_on_fake_tree(cli, tmp_path: Path, layout: str, version: str) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", layout=layout, version=version, chip="910B3")
    proc = cli("doctor", "--cann-home", str(fake.root), "--workdir", str(tmp_path / "wd"), "--json")
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    checks = _checks(data)
    assert checks["cann"]["status"] == "pass" and f"CANN {version}" in checks["cann"]["detail"]
    assert data["facts"]["row"] == version  # the installed CANN's row, chosen without --cann
    assert data["facts"]["cann"]["version"] == version
    assert data["facts"]["cann"]["driver"]["package_version"] == "25.2.0"
    assert checks["driver"]["status"] == "pass"
    assert checks["npu"]["status"] == "pass" and "910B3" in checks["npu"]["detail"]
    assert data["facts"]["npu"]["soc_version"] == "ascend910b3"
    assert checks["set_env"]["status"] == "pass" and "set_env.sh returns 1" in checks["set_env"]["detail"]
    assert data["facts"]["env"]["ASCEND_HOME_PATH"] == str(fake.toolkit)
    assert checks["nnal"]["status"] == "pass"
    assert checks["workdir"]["status"] == "warn"  # a temp dir does not survive a stop


def test_doctor_mismatched_row_fails_with_fix(cli, tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", version="9.0.1")
    proc = cli("doctor", "--cann-home", str(fake.root), "--cann", "9.1.0", "--workdir", str(tmp_path / "wd"), "--json")
    assert proc.returncode == 1
    cann = _checks(json.loads(proc.stdout))["cann"]
    assert cann["status"] == "fail" and "--cann 9.0.1" in cann["fix"]


def test_doctor_set_env_that_exits_still_captures(cli, tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", set_env_mode="exit")
    proc = cli("doctor", "--cann-home", str(fake.root), "--workdir", str(tmp_path / "wd"), "--json")
    check = _checks(json.loads(proc.stdout))["set_env"]
    assert check["status"] == "pass" and "calls exit" in check["detail"]


def test_doctor_on_bare_machine(cli, tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    proc = cli("doctor", "--cann-home", str(empty), "--workdir", str(tmp_path / "wd"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "no CANN toolkit found" in proc.stdout and "cannot run vLLM-Ascend" in proc.stdout
    data = json.loads(cli("doctor", "--cann-home", str(empty), "--workdir", str(tmp_path / "wd"), "--json").stdout)
    checks = _checks(data)
    assert checks["cann"]["status"] == "fail" and checks["driver"]["status"] == "fail"
    assert checks["set_env"]["status"] == "fail"


def test_glibc_forecast() -> None:
    row = select_row(load_matrix(), "9.1.0")
    facts = machine_facts(Path("/tmp"))
    facts.glibc, facts.arch = "2.31", "aarch64"
    check = check_glibc(row, facts)
    assert check.status == "warn"
    assert "glibc 2.31 < 2.34: vllm-ascend will be built from source, ~40 min" in check.detail
    facts.glibc = "2.35"
    assert check_glibc(row, facts).status == "pass"


def test_stale_lock_and_venv_checks(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = tmp_path / "src" / "kernel_meta" / "kernel_meta.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(str(dead.pid))
    check = check_locks(tmp_path)
    assert check.status == "warn" and str(lock) in check.fix
    assert lock.exists()  # doctor reads, never removes
    leaky = tmp_path / "leaky"
    venv_module.create(leaky, system_site_packages=True, with_pip=False)
    assert check_venv(leaky).status == "warn"
    clean = tmp_path / "clean"
    venv_module.create(clean, with_pip=False)
    assert check_venv(clean).status == "pass"


def test_doctor_reports_the_install_target_a_fleet_groups_by(cli, tmp_path: Path) -> None:
    """The lock and wheelhouse key `install` would use here, with --python and --soc as install takes them."""
    from ascend_setup.fleet.target import FleetTarget
    from ascend_setup.host.machine import glibc_version, this_machine
    from ascend_setup.resolve.lockfile import lock_file_name
    from ascend_setup.sourcebuild.source import wheelhouse_key

    fake = build_fake_cann(tmp_path / "Ascend", version="9.1.0", chip="910B3")
    workdir = tmp_path / "wd"
    proc = cli(
        "doctor",
        "--cann-home",
        str(fake.root),
        "--workdir",
        str(workdir),
        "--python",
        sys.executable,
        "--soc",
        "Ascend910B4",
        "--json",
    )
    target = FleetTarget(**json.loads(proc.stdout)["facts"]["target"])
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert (target.python, target.python_executable, target.soc) == (minor, sys.executable, "ascend910b4")
    assert target.lock_name == lock_file_name("9.1.0", this_machine(minor)) and target.unknown == []
    assert set(target.indexes) >= {"mirror", "ascend"} and target.lock_key.startswith(target.lock_name[:-4] + "-")
    elsewhere = json.loads(
        cli(
            "doctor",
            "--cann-home",
            str(fake.root),
            "--workdir",
            str(workdir),
            "--python",
            sys.executable,
            "--index-url",
            "http://127.0.0.1:9/simple/",
            "--json",
        ).stdout
    )
    other = FleetTarget(**elsewhere["facts"]["target"])  # behind another mirror: same target, a lock of its own
    assert other.indexes["mirror"] == "http://127.0.0.1:9/simple/" and other.lock_name == target.lock_name
    assert other.lock_key != target.lock_key
    key = wheelhouse_key(
        version=load_matrix().rows["9.1.0"].packages["vllm-ascend"],
        cann="9.1.0",
        arch=target.arch,
        python=minor,
        glibc=glibc_version() or "unknown",
        soc="ascend910b4",
    )
    assert (target.wheelhouse_key, target.wheelhouse) == (key, str(workdir / "wheelhouse" / key))
    human = cli("doctor", "--cann-home", str(fake.root), "--workdir", str(workdir), "--python", sys.executable)
    assert f"lock {target.lock_name}, wheelhouse key {key.replace('ascend910b4', 'ascend910b3')}" in human.stdout

    empty = tmp_path / "nothing"
    empty.mkdir()
    bare = json.loads(
        cli("doctor", "--cann-home", str(empty), "--workdir", str(workdir), "--python", sys.executable, "--json").stdout
    )["facts"]["target"]
    assert bare["wheelhouse_key"] is None and any(u.startswith("cann:") for u in bare["unknown"])
    assert any(u.startswith("soc:") for u in bare["unknown"]) and bare["lock_name"] == target.lock_name


def _failed_install(workdir: Path, log_text: str) -> Path:
    """A workdir as the runner leaves it after a failed vllm-ascend step (state.json names the step's log)."""
    log = workdir / "logs" / "vllm-ascend.log"
    log.parent.mkdir(parents=True)
    log.write_text(log_text)
    record = {
        "state": "failed",
        "fingerprint": "f",
        "started_at": 1.0,
        "ended_at": 2.0,
        "log": str(log),
        "error": "step vllm-ascend failed",
    }
    (workdir / "state.json").write_text(
        json.dumps(
            {
                "format": "ascend-setup-state",
                "version": 1,
                "options": {"cann": "9.1.0"},
                "steps": {"vllm-ascend": record},
            }
        )
    )
    return log


def test_doctor_names_the_root_cause_of_the_last_failed_step(cli, tmp_path: Path) -> None:
    """The same triage as `ascend-setup triage`: the corpus's real ROOT_DIR log, its cause and line."""
    workdir = tmp_path / "wd"
    corpus = Path(__file__).resolve().parents[1] / "data" / "logs" / "root-dir-unset.log"
    log = _failed_install(workdir, corpus.read_text())
    expected = json.loads(cli("triage", str(log), "--json").stdout)
    data = json.loads(cli("doctor", "--cann-home", str(tmp_path), "--workdir", str(workdir), "--json").stdout)
    check = _checks(data)["last-failure"]
    assert check["status"] == "fail" and expected["id"] == "root-dir-unset"
    assert expected["cause"] in check["detail"] and f"line {expected['line_number']}" in check["detail"]
    assert check["fix"] == expected["fix"]


def test_doctor_without_a_failed_step_or_with_an_unknown_cause(cli, tmp_path: Path) -> None:
    data = json.loads(cli("doctor", "--cann-home", str(tmp_path), "--workdir", str(tmp_path / "none"), "--json").stdout)
    assert _checks(data)["last-failure"]["status"] == "pass"
    workdir = tmp_path / "wd"
    _failed_install(workdir, "all is quiet\nnothing error-shaped here\n")
    data = json.loads(cli("doctor", "--cann-home", str(tmp_path), "--workdir", str(workdir), "--json").stdout)
    check = _checks(data)["last-failure"]
    assert check["status"] == "warn" and "ascend-setup triage" in check["fix"]


def _serving(tmp_path: Path, pins: dict, page_delay: float = 0.0):
    """A loopback index serving one wheel of each pin, its pages after `page_delay` seconds."""
    from ascend_setup.simulate.dists import build_wheel
    from ascend_setup.simulate.index_server import Behaviour, LocalIndex

    index = LocalIndex(Behaviour(page_delay=page_delay))
    for name, version in pins.items():
        index.add(build_wheel(tmp_path / f"wheels-{page_delay}", name, version))
    return index


def _refusing() -> str:
    """The URL of a loopback port nobody listens on: connections are refused at once."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/simple/"


def test_index_answers_fine_slow_refusing_and_silent_within_the_bound(tmp_path: Path) -> None:
    """Each index is asked for one pin, all at once: the silent one costs the bound, never more."""
    import time

    from ascend_setup.index.answers import ask_indexes
    from ascend_setup.index.reach import IndexNeed
    from ascend_setup.simulate.index_server import BlackHole

    fine = _serving(tmp_path, {"vllm": "0.23.0"})
    slow = _serving(tmp_path, {"torch": "2.10.0"}, page_delay=1.0)
    stale = _serving(tmp_path, {"triton-ascend": "3.1.0"})
    silent = BlackHole()
    needs = [
        IndexNeed("mirror", [fine.url], {"vllm": "0.23.0"}),
        IndexNeed("pytorch-cpu", [slow.url], {"torch": "2.10.0"}),
        IndexNeed("ascend", [stale.url], {"triton-ascend": "3.2.2"}),
        IndexNeed("refusing", [_refusing()], {"vllm": "0.23.0"}),
        IndexNeed("silent", [silent.url], {"vllm": "0.23.0"}),
    ]
    start = time.monotonic()
    answers = {a.name: a for a in ask_indexes(needs, within=2.5, slow=0.5)}
    took = time.monotonic() - start
    assert took < 2.5 + 1.0, took
    assert answers["mirror"].status == "reachable" and answers["mirror"].seconds < 0.5
    assert answers["pytorch-cpu"].status == "slow" and 1.0 <= answers["pytorch-cpu"].seconds < 2.5
    assert answers["ascend"].status == "stale" and "has only 3.1.0" in answers["ascend"].detail
    assert answers["refusing"].status == "unreachable" and "refused" in answers["refusing"].detail.lower()
    assert answers["silent"].status == "unreachable" and answers["silent"].seconds is None
    assert "took 1." in answers["pytorch-cpu"].line() and "no answer" in answers["silent"].line()


def test_doctor_asks_each_index_and_reports_it_in_json(cli, tmp_path: Path) -> None:
    import platform

    row = load_matrix().rows["9.1.0"].for_arch(platform.machine())
    mirror = _serving(tmp_path, {"vllm": row.packages["vllm"]})
    ascend_pin = next(iter(row.packages_from("ascend").items()))
    slow = _serving(tmp_path, dict([ascend_pin]), page_delay=3.0)
    fake = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    proc = cli(
        "doctor",
        "--cann-home",
        str(fake.root),
        "--workdir",
        str(tmp_path / "wd"),
        "--json",
        "--index-url",
        mirror.url,
        "--index",
        f"ascend={slow.url}",
        "--index",
        f"pytorch-cpu={_refusing()}",
    )
    data = json.loads(proc.stdout)
    answers = {a["name"]: a for a in data["facts"]["indexes"]}
    assert answers["mirror"]["status"] == "reachable" and answers["mirror"]["url"] == mirror.url
    assert answers["ascend"]["status"] == "slow" and answers["ascend"]["package"] == "==".join(ascend_pin)
    assert 3.0 <= answers["ascend"]["seconds"] < 5.0
    if row.packages_from("pytorch-cpu"):  # x86_64 takes torch+cpu from it; aarch64 does not use it
        assert answers["pytorch-cpu"]["status"] == "unreachable"
    check = _checks(data)["indexes"]
    assert check["status"] == ("fail" if row.packages_from("pytorch-cpu") else "warn") and check["fix"]
    assert "index ascend" in check["detail"] and "is slow" in check["detail"]
