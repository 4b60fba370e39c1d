"""The managed interpreter, end to end: an install on a host given no interpreter it may use (`--python
managed`) fetches the pinned CPython from the first mirror that has the exact file (a loopback release laid
out as python-build-standalone's), has uv unpack it into the workdir, and makes the venv from it; a stop
mid-download resumes from its byte, and a second run installs nothing."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest
from helpers.processes import wait_for
from helpers.python_releases import BUILD, ReleaseServer, pbs_archive, write_builds_file
from helpers.stack import kill_group

#: The OS's userland decides whether a python-build-standalone-shaped CPython unpacks and runs (glibc, the
#: interpreter it is made from): the glibc 2.31 root runs this file too, as a host with only old Pythons would.
pytestmark = pytest.mark.userland


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    archive, version, sha256 = pbs_archive(tmp_path_factory.mktemp("pbs"))
    server = ReleaseServer({f"{BUILD}/{archive.name}": archive.read_bytes()})
    yield archive, version, sha256, server
    server.close()


def managed_argv(stack, workdir: Path, builds: Path, *extra: str) -> List[str]:
    argv = stack.install_argv(workdir, "--python-builds", str(builds), *extra)
    at = argv.index("--python")
    return argv[:at] + ["--python", "managed"] + argv[at + 2 :]


def test_an_install_with_a_managed_python(wheel_stack, release, tmp_path: Path) -> None:
    archive, version, sha256, server = release
    dead = "http://127.0.0.1:9/pbs"  # refuses: the probe names it and the download skips it
    missing = f"{server.url}/nothing-here"  # answers 404 for the exact file, as a mirror keeping one release does
    builds = write_builds_file(tmp_path / "builds.json", archive, version, sha256, [dead, missing, server.url])
    workdir = tmp_path / "w"
    done = wheel_stack.install(workdir, argv=managed_argv(wheel_stack, workdir, builds))
    assert done.returncode == 0, done.stderr[-3000:]
    minor = ".".join(version.split(".")[:2])
    key = f"cpython-{version}-linux-{archive.name.split('-')[2]}-gnu"
    python = workdir / "python" / key / "bin" / f"python{minor}"
    assert python.is_file()
    cfg = (workdir / "venv" / "pyvenv.cfg").read_text()
    assert f"home = {python.parent}" in cfg, cfg
    assert "a managed CPython" in done.stderr
    log = (workdir / "logs" / "python.log").read_text()
    assert f"mirror {dead}/{BUILD}/" in log and "connection refused" in log
    assert "HTTP 404" in log and "has it" in log
    assert "uv python install" in log
    state = json.loads((workdir / "state.json").read_text())
    assert state["steps"]["preflight"]["outputs"]["managed"] == key
    gets = [r for r in server.requests if r[0] == "GET" and r[1].endswith(archive.name)]
    assert len(gets) == 1, server.requests
    again = wheel_stack.install(workdir, argv=managed_argv(wheel_stack, workdir, builds))
    assert again.returncode == 0, again.stderr[-2000:]
    assert len([r for r in server.requests if r[0] == "GET" and r[1].endswith(archive.name)]) == 1
    assert not (Path.home() / ".local" / "bin" / f"python{minor}").is_symlink() or "python/cpython" not in str(
        (Path.home() / ".local" / "bin" / f"python{minor}").resolve()
    )


def test_a_stop_mid_download_resumes_from_its_byte(wheel_stack, release, tmp_path: Path) -> None:
    archive, version, sha256, _ = release
    data = archive.read_bytes()
    slow = ReleaseServer({f"{BUILD}/{archive.name}": data}, rate=len(data) // 8)  # about 8 s for the file
    try:
        builds = write_builds_file(tmp_path / "builds.json", archive, version, sha256, [slow.url])
        workdir = tmp_path / "w"
        argv = managed_argv(wheel_stack, workdir, builds)
        proc = subprocess.Popen(
            argv, env=wheel_stack.env(), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        part = workdir / "downloads" / "python" / (archive.name + ".part")
        assert wait_for(lambda: part.exists() and part.stat().st_size > len(data) // 4, proc, timeout=120)
        kill_group(proc)
        had = part.stat().st_size
        assert 0 < had < len(data)
        time.sleep(0.1)
        done = wheel_stack.install(workdir, argv=argv)
        assert done.returncode == 0, done.stderr[-3000:]
        ranges = [r[2] for r in slow.requests if r[0] == "GET"]
        assert ranges[0] is None and ranges[-1] is not None and int(ranges[-1][6:].split("-")[0]) >= had // 2, ranges
        assert not part.exists()
    finally:
        slow.close()


def test_no_mirror_with_the_file_is_one_error_naming_each(wheel_stack, release, tmp_path: Path) -> None:
    archive, version, _, server = release
    builds = write_builds_file(
        tmp_path / "builds.json", archive, version, "0" * 64, [f"{server.url}/nothing-here", "http://127.0.0.1:9/pbs"]
    )
    workdir = tmp_path / "w"
    failed = wheel_stack.install(workdir, argv=managed_argv(wheel_stack, workdir, builds))
    assert failed.returncode == 1, failed.stderr[-2000:]
    assert "no mirror has" in failed.stderr and "HTTP 404" in failed.stderr and "connection refused" in failed.stderr
    assert "--python-mirror" in failed.stderr
    assert not (workdir / "venv").exists()


def test_an_interrupted_unpack_is_reinstalled(wheel_stack, release, tmp_path: Path) -> None:
    """uv stopped after moving the interpreter in, before fixing it up: the next run reinstalls it from the
    archive it already has (no download), and the install converges."""
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.steps.install_session import install_store

    archive, version, sha256, server = release
    builds = write_builds_file(tmp_path / "builds.json", archive, version, sha256, [server.url])
    workdir = tmp_path / "w"
    argv = managed_argv(wheel_stack, workdir, builds)
    assert wheel_stack.install(workdir, argv=argv).returncode == 0
    gets = len([r for r in server.requests if r[0] == "GET"])
    minor = ".".join(version.split(".")[:2])
    (install,) = (workdir / "python").glob(f"cpython-{version}-*")
    (install / "lib" / f"python{minor}" / "os.py").write_text("raise SystemExit('half-written')\n")
    store = install_store(Workdir(workdir))
    state = store.load()
    store.mark(state, "python", state.steps["python"].model_copy(update={"state": "started", "ended_at": None}))
    again = wheel_stack.install(workdir, argv=argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "half-written" not in (install / "lib" / f"python{minor}" / "os.py").read_text()
    assert "--reinstall" in (workdir / "logs" / "python.log").read_text()
    assert len([r for r in server.requests if r[0] == "GET"]) == gets


@pytest.mark.live
def test_the_real_pinned_build_unpacks_and_runs(tmp_path: Path) -> None:
    """The packaged pin against the real release: the first mirror that has the exact file, its sha256, uv's
    unpacking, and an interpreter that runs and makes venvs. Skipped (with each mirror's answer) where none
    of them can be reached, as on a machine that reaches only package registries."""
    import platform

    from ascend_setup.managed.pinned import load_builds
    from ascend_setup.managed.sources import probe_all
    from ascend_setup.managed.uv_python import fetch_archive, install_build

    builds = load_builds()
    build = builds.find("3.11", platform.machine())
    assert build is not None
    probes = probe_all([build.url(p) for p in builds.prefixes()])
    if not any(p.ok for p in probes):
        pytest.skip(
            "no mirror of the release answers here: " + "; ".join(f"{p.url.split('/')[2]}: {p.problem}" for p in probes)
        )
    log = tmp_path / "python.log"
    archive = fetch_archive(builds, build, tmp_path / "downloads", log)
    interp = install_build(build, archive, tmp_path / "python", tmp_path / "cache", log, network={})
    assert interp.version == build.version and interp.has_venv
    out = subprocess.run(
        [interp.path, "-c", "import ssl, sqlite3, ctypes, venv; print('ok')"], capture_output=True, text=True
    )
    assert out.stdout.strip() == "ok", out.stderr


def _can_mask() -> bool:
    import shutil as _shutil

    return (
        os.geteuid() == 0
        and _shutil.which("unshare") is not None
        and subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0
    )


@pytest.mark.skipif(not _can_mask(), reason="needs root and unshare --mount to hide this machine's interpreters")
def test_a_host_with_no_python_in_its_range_gets_a_managed_one(
    wheel_stack, release, tmp_path: Path, monkeypatch
) -> None:
    """No --python at all, on a host whose interpreters are all outside the row's range (each one in range
    that the search would find is hidden under an empty file in a private mount namespace, as on Ubuntu
    20.04 with its 3.8): preflight chooses the managed build and the install reaches a verified venv."""
    from ascend_setup.host.interpreters import candidate_paths, probe
    from ascend_setup.matrix import load_matrix

    archive, version, sha256, server = release
    row = load_matrix().rows["9.1.0"]
    env = wheel_stack.env(PATH="/usr/local/bin:/usr/bin:/bin")
    for var in ("PYENV_ROOT", "CONDA_PREFIX", "UV_PYTHON_INSTALL_DIR"):  # the search reads them: the child has none
        env.pop(var, None)
        monkeypatch.delenv(var, raising=False)
    own = os.path.realpath(sys.executable)
    found = candidate_paths(home=env["HOME"], path_env=env["PATH"])
    hide = sorted({os.path.realpath(p) for p in found if (i := probe(p)) is not None and row.python_allows(i.version)})
    if own in hide:
        pytest.skip(f"the suite's own interpreter {own} is on the search path: it cannot be hidden from itself")
    empty = tmp_path / "not-a-python"
    empty.write_text("")
    builds = write_builds_file(tmp_path / "builds.json", archive, version, sha256, [server.url])
    workdir = tmp_path / "w"
    argv = managed_argv(wheel_stack, workdir, builds)
    at = argv.index("--python")
    argv = argv[:at] + argv[at + 2 :]  # no --python: the search decides
    masks = " && ".join(f"mount --bind {empty} {shlex.quote(p)}" for p in hide) or "true"
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{masks} && exec "$@"', "sh", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no Python in" in done.stderr and "a managed CPython" in done.stderr, done.stderr[-2000:]
    (python,) = (workdir / "python").glob(f"cpython-{version}-*/bin/python{version.rsplit('.', 1)[0]}")
    assert f"home = {python.parent}" in (workdir / "venv" / "pyvenv.cfg").read_text()
