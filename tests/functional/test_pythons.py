"""Which Python: discovery over fake interpreter trees, the choice by the wheels the row publishes,
plan's assumption when no interpreter fits, and install hints that work on the OS at hand."""

from __future__ import annotations

import io
import json
import platform
import stat
import sys
from pathlib import Path

import pytest
from helpers.session import session_for
from rich.console import Console

from ascend_setup.host.interpreters import Interpreter, candidate_paths, find_interpreters
from ascend_setup.host.machine import glibc_version
from ascend_setup.host.os_hints import python_install_hint
from ascend_setup.index.pipconfig import pip_settings
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.resolve import pythons
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.resolve.pythons import target_python
from ascend_setup.simulate.ecosystem import build_ecosystem
from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.index_server import LocalIndex
from ascend_setup.steps.preflight import Preflight

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland

MATRIX = load_matrix()
ARCH, GLIBC = platform.machine(), glibc_version() or "2.17"


def fake_python(path: Path, version: str) -> Path:
    """An executable that answers the interpreter probe like CPython `version` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "Python {version}"; exit 0; fi\n'
        f'echo \'{{"version": "{version}", "venv": true, "executable": "{path}"}}\'\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    row = MATRIX.rows["9.1.0"]
    eco = build_ecosystem(tmp_path_factory.mktemp("eco"), dict(row.packages), dict(row.cann_python_deps))
    indexes = (LocalIndex(), LocalIndex(), LocalIndex())
    for index, directory in zip(indexes, (eco.main, eco.ascend, eco.pytorch_cpu)):
        index.add_dir(directory)
    matrix = MATRIX.with_indexes({"ascend": indexes[1].url, "pytorch-cpu": indexes[2].url})
    yield matrix, indexes[0].url
    for index in indexes:
        index.close()


def test_discovery_covers_the_usual_prefixes(tmp_path: Path, monkeypatch) -> None:
    root, home, on_path = tmp_path / "root", tmp_path / "home", tmp_path / "bin"
    for var in ("PYENV_ROOT", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    expected = [
        fake_python(on_path / "python3.11", "3.11.9"),
        fake_python(root / "opt" / "py311" / "bin" / "python3.11", "3.11.4"),
        fake_python(root / "usr" / "local" / "python3.10" / "bin" / "python3.10", "3.10.14"),
        fake_python(home / "miniconda3" / "envs" / "serve" / "bin" / "python3", "3.12.3"),
        fake_python(home / ".pyenv" / "versions" / "3.10.13" / "bin" / "python3.10", "3.10.13"),
        fake_python(home / ".local" / "share" / "uv" / "python" / "cpython-3.11.10" / "bin" / "python3.11", "3.11.10"),
        fake_python(tmp_path / "uv-pythons" / "cpython-3.12.8" / "bin" / "python3.12", "3.12.8"),
    ]
    fake_python(root / "opt" / "py311" / "bin" / "python3.11-config", "0")  # not an interpreter
    found = candidate_paths(root=str(root), home=str(home), path_env=str(on_path))
    assert sorted(found) == sorted(str(p) for p in expected)
    versions = {i.version for i in find_interpreters(root=str(root), home=str(home), path_env=str(on_path))}
    assert versions == {"3.11.9", "3.11.4", "3.10.14", "3.12.3", "3.10.13", "3.11.10", "3.12.8"}


def test_the_newest_python_whose_wheels_exist_is_chosen(stub) -> None:
    matrix, mirror = stub
    row = select_row(matrix, "9.1.0", ARCH)
    sources = IndexSources.for_row(matrix, row, mirror)
    pages = pythons.row_pages(row, sources, deadline=10)
    candidates = [
        Interpreter("/x/python3.12", "3.12.7", True),
        Interpreter("/x/python3.11", "3.11.9", True),
        Interpreter("/x/python3.10", "3.10.14", True),
    ]
    choice = pythons.choose_python(row, candidates, ARCH, GLIBC, pages)
    assert choice.interpreter.minor == "3.11" and not any("triton-ascend" in g for g in choice.gaps)
    # what every interpreter lacks (vllm-ascend's manylinux_2_34 wheels on an older glibc) is not a reason
    assert choice.reasons == [f"3.12 passed over: triton-ascend 3.2.2 has no cp312 wheel for {ARCH} / glibc {GLIBC}"]
    # --python wins, and says what it forces
    forced = pythons.pick_python(row, sources, ARCH, GLIBC, explicit=sys.executable)
    assert forced.interpreter.path == sys.executable


def test_preflight_picks_311_over_312_and_says_why(stub, tmp_path: Path, monkeypatch) -> None:
    matrix, mirror = stub
    python312 = fake_python(tmp_path / "bin" / "python3.12", "3.12.7")
    real = Interpreter(sys.executable, "%d.%d.%d" % sys.version_info[:3], True)
    if real.minor != "3.11":
        pytest.skip("needs the suite's interpreter to be 3.11, the one the stub triton-ascend publishes for")
    monkeypatch.setattr(pythons, "find_interpreters", lambda: [Interpreter(str(python312), "3.12.7", True), real])
    cann = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    ctx = session_for(
        tmp_path / "wd",
        console=Console(file=io.StringIO()),
        cann_home=str(cann.root),
        index_url=mirror,
        soc="ascend910b3",
        matrix=matrix,
        row=select_row(matrix, "9.1.0", ARCH),
        pip_settings=pip_settings(),
    )
    (tmp_path / "wd").mkdir()
    log = tmp_path / "preflight.log"
    facts = Preflight().run(ctx, log)
    assert facts.python_version.startswith("3.11.") and facts.target.python == "3.11"
    assert "3.12 passed over: triton-ascend 3.2.2 has no cp312 wheel" in log.read_text()


def test_doctor_names_the_python_the_install_takes(stub, tmp_path: Path, monkeypatch, capsys) -> None:
    """3.12 fits the row's range and passes the python check; the install takes 3.11 (triton-ascend has no
    cp312 wheel), and doctor says so instead of leaving the newest one standing as the answer."""
    from ascend_setup.cli import main as cli
    from ascend_setup.host import doctor_checks as doctor

    matrix, mirror = stub
    python312 = fake_python(tmp_path / "bin" / "python3.12", "3.12.7")
    real = Interpreter(sys.executable, "%d.%d.%d" % sys.version_info[:3], True)
    if real.minor != "3.11":
        pytest.skip("needs the suite's interpreter to be 3.11, the one the stub triton-ascend publishes for")
    found = [Interpreter(str(python312), "3.12.7", True), real]
    monkeypatch.setattr(pythons, "find_interpreters", lambda: found)
    monkeypatch.setattr(doctor, "find_interpreters", lambda *extra: found)
    cann = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    argv = [
        "doctor",
        "--cann-home",
        str(cann.root),
        "--workdir",
        str(tmp_path / "wd"),
        "--index-url",
        mirror,
        "--index",
        f"ascend={matrix.index_url('ascend')}",
        "--index",
        f"pytorch-cpu={matrix.index_url('pytorch-cpu')}",
        "--json",
    ]
    cli.main(argv)
    data = json.loads(capsys.readouterr().out)
    (check,) = [c for c in data["checks"] if c["id"] == "python"]
    assert check["status"] == "pass" and f"Python 3.12.7 at {python312}" in check["detail"], check
    assert f"the install takes Python 3.11 at {sys.executable}" in check["detail"], check
    assert data["facts"]["python"]["version"] == "3.12.7" and data["facts"]["target"]["python"] == "3.11"


def test_plan_states_the_python_it_assumes(stub, monkeypatch) -> None:
    matrix, mirror = stub
    row = select_row(matrix, "9.1.0", ARCH)
    sources = IndexSources.for_row(matrix, row, mirror)
    monkeypatch.setattr(pythons, "find_interpreters", lambda: [Interpreter("/usr/bin/python3.9", "3.9.2", True)])
    minor, note = target_python(None, row, sources, ARCH, GLIBC)
    assert minor == "3.11" and "no Python in" in note and "a managed CPython 3.11" in note
    minor, note = target_python(None, row, sources, "aarch64" if ARCH == "x86_64" else "x86_64", "2.31")
    assert minor == "3.11" and "interpreters are unknown here" in note
    assert target_python("3.10", row, sources, ARCH, GLIBC) == ("3.10", "")


def test_pip_configuration_of_every_pip_generation_is_read() -> None:
    from ascend_setup.index.pipconfig import _classify

    old = {":env:.cert": "/ca.pem", "global.constraint": "/c.txt", "global.index-url": "http://i/simple"}
    new = {
        ":env:": {":env:.cert": "/ca.pem", ":env:.config-file": "/p.conf"},
        "/etc/pip.conf": {"global.constraint": "/c.txt", "global.index-url": "http://i/simple"},
    }
    for items in (old, new):
        index, network, ignored = _classify(items)
        assert index == "http://i/simple" and network == {"cert": "/ca.pem"}
        assert list(ignored) == ["global.constraint"] and ignored["global.constraint"].startswith("/c.txt")
    assert _classify(new)[2]["global.constraint"] == "/c.txt (in /etc/pip.conf)"


@pytest.mark.parametrize(
    "release, words",
    [
        ({"ID": "ubuntu", "VERSION_ID": "20.04"}, "ppa:deadsnakes/ppa"),
        ({"ID": "ubuntu", "VERSION_ID": "22.04"}, "ppa:deadsnakes/ppa"),
        ({"ID": "debian", "VERSION_ID": "11"}, "pyenv install 3.11"),
        ({"ID": "debian", "VERSION_ID": "12"}, "apt-get install python3.11 python3.11-venv"),
        ({"ID": "openEuler", "VERSION_ID": "22.03"}, "dnf install python3.11"),
        ({"ID": "kylin", "VERSION_ID": "V10"}, "uv python install 3.11"),
        ({}, "UV_PYTHON_INSTALL_MIRROR"),
    ],
)
def test_python_hints_fit_the_os(release, words) -> None:
    assert words in python_install_hint("3.11", release)
    assert "apt-get install python3.11 " not in python_install_hint("3.11", {"ID": "debian", "VERSION_ID": "11"})


def test_an_index_that_cannot_be_asked_falls_back_to_the_pythons_the_matrix_knows() -> None:
    """The Ascend index unreachable: 3.12 fitted "by default" and the lock was made for it, though no
    triton-ascend release has a cp312 wheel. The matrix says which Pythons it has wheels for, and the
    choice says it used that."""
    from ascend_setup.host.interpreters import Interpreter
    from ascend_setup.matrix import load_matrix
    from ascend_setup.resolve.pythons import choose_python

    row = load_matrix().rows["9.1.0"]
    found = [Interpreter(path=f"/p/{v}", version=v, has_venv=True) for v in ("3.12.1", "3.11.9", "3.10.4")]
    for pages in (None, {n: [] for n in row.packages}):
        choice = choose_python(row, found, "aarch64", "2.31", pages)
        assert choice.interpreter.minor == "3.11", choice
        assert (
            choice.reasons[0].startswith("3.11: its index could not be asked") and "triton-ascend" in choice.reasons[0]
        )
