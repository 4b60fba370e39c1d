"""The Ansible playbooks (ansible/) on a fleet of three hosts on this machine (ansible_connection=local,
each with its own workdir and venv) against the simulated Ascend host, host3 behind a mirror of its own:
one lock per mirror, one vllm-ascend build, changed=0 on the second play, convergence after a SIGKILL of
the play, one audit report."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
import yaml
from helpers.ansible import recap
from helpers.stack import Stack, freeze, installed, kill_group, lock_versions

from ascend_setup.resolve.lockfile import read_lock
from ascend_setup.simulate.index_server import LocalIndex

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"
HOSTS = ("host1", "host2", "host3")


class Fleet:
    """Three hosts in one inventory, and the controller's fleet directory, under `root`."""

    def __init__(self, stack: Stack, root: Path, mirror: LocalIndex) -> None:
        self.stack, self.root, self.mirror = stack, root, mirror
        self.fleet_dir = root / "controller"
        self.inventory = root / "inventory.yml"
        command = [sys.executable, "-m", "ascend_setup"]
        indexes = dict(arg.split("=", 1) for arg in stack.index_args()[3::2])
        self.inventory.write_text(
            yaml.safe_dump(
                {
                    "ascend": {
                        "hosts": {
                            h: {
                                "ascend_workdir": str(self.workdir(h)),
                                **({"ascend_index_url": mirror.url} if h == "host3" else {}),
                            }
                            for h in HOSTS
                        },
                        "vars": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                            "ascend_setup_command": command,
                            "ascend_cann_home": str(stack.cann.root),
                            "ascend_python": sys.executable,
                            "ascend_index_url": stack.main.url,
                            "ascend_indexes": indexes,
                            "ascend_mirror": "none",
                            "ascend_fleet_dir": str(self.fleet_dir),
                        },
                    }
                }
            )
        )

    def workdir(self, host: str) -> Path:
        return self.root / host / "ascend-setup"

    def env(self) -> Dict[str, str]:
        tmp = self.root / "ansible-tmp"
        return self.stack.env(
            ANSIBLE_LOCAL_TEMP=str(tmp / "local"),
            ANSIBLE_REMOTE_TEMP=str(tmp / "remote"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_FORCE_COLOR="0",
            ANSIBLE_RETRY_FILES_ENABLED="0",
            LC_ALL="C.UTF-8",
            LANG="C.UTF-8",
        )

    def argv(self, playbook: str, *extra: str) -> List[str]:
        return [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(self.inventory),
            str(ANSIBLE / playbook),
            *extra,
        ]

    def play(self, playbook: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(playbook, *extra), capture_output=True, text=True, env=self.env(), timeout=900)

    def spawn(self, playbook: str) -> subprocess.Popen:
        return subprocess.Popen(
            self.argv(playbook),
            env=self.env(),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def builds(fleet: Fleet) -> int:
    """Source builds of vllm-ascend across the fleet (each build compiles its 6 stages once)."""
    return sum(
        (fleet.workdir(h) / "logs" / "vllm-ascend.log").read_text().count("[100%] Building CXX object") for h in HOSTS
    )


def report(fleet: Fleet) -> dict:
    (path,) = sorted((fleet.fleet_dir / "audit").glob("*/report.json"))[-1:]
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def mirror(source_stack: Stack):
    """A second mirror of the main index (the same files), for host3."""
    index = LocalIndex()
    index.add_dir(source_stack.host.eco.main)
    yield index
    index.close()


@pytest.fixture(scope="module")
def converged(source_stack: Stack, mirror: LocalIndex, tmp_path_factory) -> Fleet:
    """One play on three fresh hosts."""
    fleet = Fleet(source_stack, tmp_path_factory.mktemp("fleet"), mirror)
    start = time.monotonic()
    proc = fleet.play("install.yml")
    print(f"fleet: first play on {len(HOSTS)} hosts {time.monotonic() - start:.1f}s")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert {h: r["failed"] for h, r in recap(proc).items()} == {h: 0 for h in HOSTS}
    return fleet


def test_one_play_one_lock_one_build_three_clean_audits(converged: Fleet) -> None:
    fleet = converged
    assert builds(fleet) == 1
    reused = [h for h in HOSTS if "reusing " in (fleet.workdir(h) / "logs" / "vllm-ascend.log").read_text()]
    assert len(reused) == 2
    locks = {read_lock(path).indexes["mirror"]: path for path in (fleet.fleet_dir / "locks").iterdir()}
    assert set(locks) == {fleet.stack.main.url, fleet.mirror.url}  # host3's lock was resolved on its own mirror
    for h in HOSTS:  # every host installed its lock from the controller, exactly
        lock = locks[fleet.mirror.url if h == "host3" else fleet.stack.main.url]
        assert (fleet.workdir(h) / "fleet" / lock.name).read_bytes() == lock.read_bytes()
        assert installed(fleet.workdir(h) / "venv") == lock_versions(fleet.workdir(h))
    lock = locks[fleet.stack.main.url]
    given = fleet.workdir("host1") / "fleet" / lock.name  # a dry run with --lock shows that lock, not a new one
    argv = fleet.stack.install_argv(fleet.workdir("host1"), "--dry-run", "--json", "--lock", str(given))
    dry = json.loads(fleet.stack.cli(*argv[3:]).stdout)
    assert dry["closure"]["lock"] == str(given) and dry["changed"] is False
    proc = fleet.play("audit.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    data = report(fleet)
    assert data["ok"] and [h["host"] for h in data["hosts"]] == list(HOSTS)
    assert all(h["result"].startswith("clean") and h["lock"] for h in data["hosts"])


def test_second_play_changes_nothing(converged: Fleet) -> None:
    start = time.monotonic()
    proc = converged.play("install.yml")
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {h: r["changed"] for h, r in recap(proc).items()} == {h: 0 for h in HOSTS}, proc.stdout[-4000:]
    check = converged.play("install.yml", "--check")
    assert check.returncode == 0, check.stdout[-4000:]
    assert {h: r["changed"] for h, r in recap(check).items()} == {h: 0 for h in HOSTS}, check.stdout[-4000:]
    assert builds(converged) == 1
    print(f"fleet: second play {took:.1f}s")


def test_audit_report_names_the_broken_host(converged: Fleet) -> None:
    venv = converged.workdir("host2") / "venv"
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--index-url",
            converged.stack.main.url,
            "triton==3.5.0",
        ],
        check=True,
        capture_output=True,
        env=converged.stack.env(),
    )
    proc = converged.play("audit.yml")
    assert proc.returncode != 0
    assert "host2: triton-upstream (triton)" in proc.stdout and "not clean: host2" in proc.stdout
    data = report(converged)
    assert not data["ok"] and data["findings"]["triton-upstream"] == ["host2"]
    assert [h["host"] for h in data["hosts"] if h["ok"]] == ["host1", "host3"]


def test_doctor_play_says_each_hosts_lock(converged: Fleet) -> None:
    """doctor.yml, read-only: a line per host with the lock its install takes (host3's, on its own mirror)."""
    proc = converged.play("doctor.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {h: r["changed"] for h, r in recap(proc).items()} == {h: 0 for h in HOSTS}
    installed_locks = {h: next((converged.workdir(h) / "fleet").iterdir()).name for h in HOSTS}
    for h in HOSTS:
        assert re.search(rf'ok: \[{h}\] => {{\s*"msg": "[^"]*; lock {re.escape(installed_locks[h])}"', proc.stdout), h
    assert installed_locks["host3"] != installed_locks["host1"] == installed_locks["host2"]


def test_a_killed_play_converges_on_the_next(
    source_stack: Stack, mirror: LocalIndex, converged: Fleet, tmp_path: Path
) -> None:
    fleet = Fleet(source_stack, tmp_path, mirror)
    proc = fleet.spawn("install.yml")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:  # kill while the hosts install packages
        if any((fleet.workdir(h) / "logs" / "torch-stack.log").exists() for h in HOSTS):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the play ended before the hosts installed anything"
    kill_group(proc)
    while True:  # nothing of the play (the hosts' installs included) may survive the kill
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    again = fleet.play("install.yml")
    assert again.returncode == 0, again.stdout[-6000:]
    want = freeze(converged.workdir("host1") / "venv")
    for h in HOSTS:
        assert freeze(fleet.workdir(h) / "venv") == want, h


@pytest.mark.live
def test_bootstrap_puts_the_tool_on_a_bare_host(tmp_path: Path) -> None:
    """ascend_bootstrap: the checkout's wheel is built on the controller and installed on the host into a venv
    of its own, its dependencies from pip's configured index; the tool then runs there (doctor), and the
    next play installs nothing."""
    tool = tmp_path / "host" / "tool"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "ascend": {
                    "hosts": {"bare": {}},
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": sys.executable,
                        "ascend_bootstrap": True,
                        "ascend_tool_home": str(tool),
                        "ascend_tool_python": sys.executable,
                        "ascend_workdir": str(tmp_path / "host" / "ascend-setup"),
                        "ascend_fleet_dir": str(tmp_path / "controller"),
                        "ascend_setup_command": ["/nonexistent/ascend-setup"],
                    },
                }
            }
        )
    )  # bootstrapped: never used on the host
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ASCEND_"))}
    env.update(
        HOME=str(tmp_path / "host"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_NOCOLOR="1",
        LC_ALL="C.UTF-8",
        LANG="C.UTF-8",
    )
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(ANSIBLE / "doctor.yml")]
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    assert recap(first)["bare"]["changed"] > 0 and "; lock " in first.stdout
    installed_tool = tool / "venv" / "bin" / "ascend-setup"
    version = subprocess.run([str(installed_tool), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip(), version.stderr
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0 and recap(again)["bare"]["changed"] == 0, again.stdout[-4000:]
