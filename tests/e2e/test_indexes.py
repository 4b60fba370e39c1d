"""Indexes on the install path: an index that cannot be reached fails in seconds, before any package
step; a hostile pip configuration changes nothing; a lock made by `plan` installs on its host only."""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.stack import installed, lock_versions, status

from ascend_setup.host.machine import glibc_version
from ascend_setup.simulate.dists import build_wheel
from ascend_setup.simulate.index_server import BlackHole

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland


@pytest.mark.parametrize("where", ["dns", "black-hole"])
def test_an_unreachable_index_fails_fast_before_any_package_step(source_stack, tmp_path: Path, where: str) -> None:
    hole = BlackHole()
    url = "http://ascend.invalid/simple/" if where == "dns" else hole.url
    workdir = tmp_path / "wd"
    try:
        start = time.monotonic()
        proc = source_stack.install(workdir, "--index", f"ascend={url}", timeout=120)
        took = time.monotonic() - start
    finally:
        hole.close()
    assert proc.returncode == 1 and took < 30, (took, proc.stderr[-2000:])
    assert "index 'ascend'" in proc.stderr and url in proc.stderr and "triton-ascend==3.2.2" in proc.stderr
    assert "--index ascend=URL" in proc.stderr and "Traceback" not in proc.stderr
    states = {s["name"]: s["state"] for s in status(source_stack, workdir)["steps"]}
    assert states["resolve"] == "failed" and states["venv"] == "pending"
    assert not (workdir / "venv").exists()  # nothing half-installed


def test_a_hostile_pip_configuration_is_ignored_and_listed(source_stack, tmp_path: Path) -> None:
    """With pip, the installer that would read it (uv reads no pip.conf)."""
    trap = tmp_path / "trap"
    build_wheel(trap, "decorator", "99.0")  # a find-links trap: newer than anything on the index
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch==2.11.0\ntransformers==5.6.0\n")  # conflicts with the row
    config = tmp_path / "pip.conf"
    config.write_text(
        f"[global]\nconstraint = {constraints}\nfind-links = {trap}\n"
        "extra-index-url = http://dead.invalid/simple\ntimeout = 7\n"
    )
    env = {"PIP_CONFIG_FILE": str(config), "PIP_PRE": "1"}
    workdir = tmp_path / "wd"
    proc = source_stack.install(workdir, "--installer", "pip", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    versions = installed(workdir / "venv")
    assert versions == lock_versions(workdir) and versions["decorator"] != "99.0"
    assert versions["transformers"] == "5.5.4" and versions["torch"].startswith("2.10.0")
    preflight = (workdir / "logs" / "preflight.log").read_text()
    assert "ignored pip setting: global.constraint" in preflight and "PIP_PRE" in preflight
    doctor = source_stack.cli(
        "doctor", "--cann-home", str(source_stack.cann.root), "--workdir", str(workdir), "--json", env=env
    )
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "pip-config")
    assert check["status"] == "warn"
    assert "global.constraint" in check["detail"] and "global.find-links" in check["detail"]
    assert "global.extra-index-url" in check["detail"] and "ignored" in check["detail"]
    assert "timeout" not in check["detail"].split("ignored", 1)[1]  # a network setting is kept


def _host_lock(source_stack, lock: Path) -> str:
    """plan's lock for this host; its text."""
    made = source_stack.cli(
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        glibc_version(),
        "--arch",
        platform.machine(),
        "--python",
        "%d.%d" % sys.version_info[:2],
        *source_stack.index_args(),
        "--lock",
        str(lock),
    )
    assert made.returncode == 0, made.stderr
    return lock.read_text()


def _locked(text: str, name: str) -> dict:
    return next(
        p
        for p in json.loads(text.split("# ascend-setup-lock: ", 1)[1].splitlines()[0])["packages"]
        if p["name"] == name
    )


def test_a_file_that_does_not_match_the_locks_hash_is_refused(source_stack, tmp_path: Path) -> None:
    """The install fetches every file of the lock and checks it against the lock's sha256 (what a mirror serving
    another file meets): the step fails naming the file and both hashes, and keeps nothing of it."""
    lock = tmp_path / "host.lock"
    text = _host_lock(source_stack, lock)
    decorator = _locked(text, "decorator")
    lock.write_text(text.replace(decorator["sha256"], "0" * 64))
    workdir = tmp_path / "wd"
    proc = source_stack.install(workdir, "--lock", str(lock))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    failed = next(s for s in status(source_stack, workdir)["steps"] if s["state"] == "failed")
    log = (workdir / "logs" / f"{failed['name']}.log").read_text()
    assert "0" * 64 in log and decorator["sha256"] in log and decorator["file"] in log, log[-3000:]
    assert not list((workdir / "venv").glob("lib/python*/site-packages/decorator*"))
    assert not list((workdir / "downloads").glob(decorator["file"] + "*"))  # neither the file nor its .part


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_a_fetched_file_changed_on_disk_is_refused_by_the_installer_and_fetched_again(
    source_stack, tmp_path: Path, installer: str
) -> None:
    """The installer checks the fetched files against the lock's sha256 again (--require-hashes, with both
    installers): a file changed after it was checked fails the step, is removed, and the rerun fetches it."""
    lock = tmp_path / "host.lock"
    decorator = _locked(_host_lock(source_stack, lock), "decorator")
    workdir = tmp_path / "wd"
    changed = workdir / "downloads" / decorator["file"]
    changed.parent.mkdir(parents=True)
    changed.write_bytes(b"not the lock's wheel")
    proc = source_stack.install(workdir, "--lock", str(lock), "--installer", installer)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    failed = next(s for s in status(source_stack, workdir)["steps"] if s["state"] == "failed")
    log = (workdir / "logs" / f"{failed['name']}.log").read_text()
    assert f"installer: {installer}" in log and decorator["sha256"] in log and "removed" in log, log[-3000:]
    assert "decorator" not in installed(workdir / "venv") and not changed.exists()
    rerun = source_stack.install(workdir, "--lock", str(lock), "--installer", installer)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert installed(workdir / "venv")["decorator"] == decorator["version"]


def test_a_lock_made_by_plan_installs_here_and_only_here(source_stack, tmp_path: Path) -> None:
    lock = tmp_path / "host.lock"
    _host_lock(source_stack, lock)
    workdir = tmp_path / "wd"
    proc = source_stack.install(workdir, "--lock", str(lock))
    python = "%d.%d" % sys.version_info[:2]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert installed(workdir / "venv") == lock_versions(workdir)
    assert "installing the lock" in (workdir / "logs" / "resolve.log").read_text()
    audit = source_stack.cli("audit", "--venv", str(workdir / "venv"), "--lock", str(lock), "--json")
    assert audit.returncode == 0 and json.loads(audit.stdout)["lock"] == str(lock), audit.stdout

    other = "aarch64" if platform.machine() == "x86_64" else "x86_64"
    foreign = tmp_path / "foreign.lock"
    made = source_stack.cli(
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        glibc_version(),
        "--arch",
        other,
        "--python",
        python,
        *source_stack.index_args(),
        "--lock",
        str(foreign),
    )
    assert made.returncode == 0, made.stderr
    refused = source_stack.install(tmp_path / "wd2", "--lock", str(foreign))
    line = assert_one_line_error(refused)
    assert f"made for {other}" in line and "plan --cann 9.1.0 --lock" in line
    assert not (tmp_path / "wd2").exists()
    garbage = tmp_path / "garbage.lock"
    garbage.write_text("torch==2.10.0\n")
    assert "not an ascend-setup lock" in assert_one_line_error(
        source_stack.install(tmp_path / "wd3", "--lock", str(garbage))
    )
