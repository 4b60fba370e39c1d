"""The triton step swaps atomically: triton-ascend is fetched and verified before upstream triton goes,
so any failure before the swap leaves the venv exactly as it was, and the message names the cause."""

from __future__ import annotations

import platform
import subprocess
import sys
import venv as venv_module
from pathlib import Path

import pytest
from helpers.cli import clean_env
from helpers.session import session_for
from packaging.specifiers import SpecifierSet
from rich.console import Console

from ascend_setup.errors import StepFailed
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.choose import choose
from ascend_setup.index.pipconfig import pip_settings
from ascend_setup.index.simple import SimpleIndex
from ascend_setup.index.tags import Target
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.resolve.closure import _locked
from ascend_setup.resolve.lockfile import Lock, LockedPackage, LockTarget, write_lock
from ascend_setup.simulate.ecosystem import build_ecosystem
from ascend_setup.simulate.index_server import LocalIndex
from ascend_setup.steps.common import installed_versions
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.outputs import LockRef
from ascend_setup.steps.triton import Triton

MATRIX = load_matrix()
ARCH = platform.machine()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("triton")
    row = MATRIX.rows["9.1.0"]
    eco = build_ecosystem(root / "eco", dict(row.packages), dict(row.cann_python_deps))
    ascend = LocalIndex()
    ascend.add_dir(eco.ascend)
    yield eco, ascend
    ascend.close()


def _venv_with_upstream_triton(tmp_path: Path, eco) -> Path:
    venv = tmp_path / "venv"
    venv_module.create(venv, with_pip=True)
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(eco.main),
            "--no-deps",
            "triton==3.5.0",
        ],
        check=True,
        env=clean_env(tmp_path),
    )
    return venv


def _context(tmp_path: Path, venv: Path, entry: LockedPackage, ascend_url: str) -> InstallSession:
    python = "%d.%d" % sys.version_info[:2]
    lock = Lock(
        cann="9.1.0",
        target=LockTarget(arch=ARCH, glibc=glibc_version() or "2.17", python=python),
        indexes={"mirror": "http://mirror.invalid/simple/", "ascend": ascend_url},
        inputs="test",
        packages=[entry],
    )
    path = write_lock(lock, tmp_path / "wd" / "lock" / "test.txt")
    matrix = MATRIX.with_indexes({"ascend": ascend_url})
    return session_for(
        tmp_path / "wd",
        {"resolve": LockRef(lock=str(path))},
        console=Console(file=open(tmp_path / "console.txt", "w")),
        venv=str(venv),
        installer="pip",
        matrix=matrix,
        row=select_row(matrix, "9.1.0", ARCH),
        pip_settings=pip_settings(),
    )


def _entry(ascend: LocalIndex, python: str) -> LockedPackage:
    page = SimpleIndex(ascend.url).project("triton-ascend")
    choice = choose("triton-ascend", [page], SpecifierSet("==3.2.2"), Target(glibc_version() or "2.17", ARCH, python))
    return _locked(choice, "ascend", ascend.url)


def _assert_untouched(ctx: InstallSession) -> None:
    installed = installed_versions(ctx)
    assert installed.get("triton") == "3.5.0" and "triton-ascend" not in installed


def test_unreachable_index_leaves_upstream_triton(world, tmp_path: Path) -> None:
    eco, ascend = world
    entry = _entry(ascend, "3.11").model_copy(update={"url": "http://ascend.invalid/files/triton.whl"})
    ctx = _context(tmp_path, _venv_with_upstream_triton(tmp_path, eco), entry, "http://ascend.invalid/simple/")
    with pytest.raises(StepFailed) as err:
        Triton().run(ctx, tmp_path / "triton.log")
    assert "could not be fetched" in err.value.message and "could not be reached" in err.value.message
    assert "the venv is unchanged" in err.value.hint and "--index ascend=URL" in err.value.hint
    _assert_untouched(ctx)


def test_no_file_for_this_python_leaves_upstream_triton(world, tmp_path: Path) -> None:
    eco, ascend = world
    entry = _entry(ascend, "3.12")  # the stub triton-ascend publishes cp311 wheels only
    assert entry.outcome == "unavailable"
    ctx = _context(tmp_path, _venv_with_upstream_triton(tmp_path, eco), entry, ascend.url)
    with pytest.raises(StepFailed) as err:
        Triton().run(ctx, tmp_path / "triton.log")
    assert "has no file for this host" in err.value.message and "cp312" in err.value.message
    _assert_untouched(ctx)


def test_a_hash_mismatch_leaves_upstream_triton(world, tmp_path: Path) -> None:
    eco, ascend = world
    entry = _entry(ascend, "%d.%d" % sys.version_info[:2])
    if entry.outcome == "unavailable":
        pytest.skip("the stub triton-ascend has cp311 wheels only")
    ctx = _context(
        tmp_path, _venv_with_upstream_triton(tmp_path, eco), entry.model_copy(update={"sha256": "0" * 64}), ascend.url
    )
    with pytest.raises(StepFailed) as err:
        Triton().run(ctx, tmp_path / "triton.log")
    assert "sha256" in err.value.message and "does not match" in err.value.message
    _assert_untouched(ctx)
    # and with the right file, the swap happens: triton out, triton-ascend in, kernel[grid] works
    ctx = _context(tmp_path / "ok", _venv_with_upstream_triton(tmp_path / "ok", eco), entry, ascend.url)
    assert Triton().run(ctx, tmp_path / "ok.log").removed_upstream_triton is True
    installed = installed_versions(ctx)
    assert "triton" not in installed and installed["triton-ascend"] == "3.2.2"
