"""The managed interpreter's decision and data: when preflight takes a pinned CPython instead of the host's,
which one (the rule the host's interpreters are chosen by), and the pinned file's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_setup.errors import AscendSetupError
from ascend_setup.host.interpreters import Interpreter
from ascend_setup.managed.pinned import MANAGED, PACKAGED_BUILDS, PythonBuilds, load_builds, uv_downloads_json
from ascend_setup.matrix import load_matrix
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.resolve.pythons import pick_python, row_minors

ROW = load_matrix().rows["9.1.0"]
DEAD = IndexSources.for_row(load_matrix(), ROW, "http://127.0.0.1:9/simple/")  # refused at once: no pages


def builds(*minors: str, arch: str = "x86_64") -> PythonBuilds:
    return PythonBuilds.model_validate(
        {
            "source": "test",
            "release": "https://example.invalid/r",
            "mirrors": [],
            "builds": [
                {
                    "version": f"{m}.4",
                    "arch": arch,
                    "build": "20990101",
                    "file": f"cpython-{m}.4+20990101-{arch}-unknown-linux-gnu-install_only_stripped.tar.gz",
                    "sha256": str(i) * 64,
                }
                for i, m in enumerate(minors)
            ],
        }
    )


def host(*versions: str, venv: bool = True):
    return [Interpreter(path=f"/usr/bin/python{v[:4]}", version=v, has_venv=venv) for v in versions]


def test_a_host_with_none_in_range_gets_a_managed_one() -> None:
    choice = pick_python(
        ROW, DEAD, "x86_64", "2.31", found=host("3.8.10", "3.9.5"), builds=builds("3.11"), deadline=0.5
    )
    assert choice.managed is not None and choice.managed.version == "3.11.4"
    assert choice.interpreter.version == "3.11.4" and choice.interpreter.path == ""
    assert "seen: 3.8.10, 3.9.5" in choice.reasons[0] and "managed CPython 3.11.4" in choice.reasons[0]


def test_one_in_range_without_venv_counts_as_none() -> None:
    choice = pick_python(
        ROW, DEAD, "x86_64", "2.31", found=host("3.11.2", venv=False), builds=builds("3.11"), deadline=0.5
    )
    assert choice.managed is not None


def test_a_host_interpreter_in_range_wins_unless_managed_is_asked_for() -> None:
    found = host("3.8.10", "3.11.9")
    assert pick_python(ROW, DEAD, "x86_64", "2.31", found=found, builds=builds("3.11"), deadline=0.5).managed is None
    asked = pick_python(ROW, DEAD, "x86_64", "2.31", explicit=MANAGED, found=found, builds=builds("3.11"), deadline=0.5)
    assert asked.managed is not None and "--python managed" in asked.reasons[0]


def test_the_managed_minor_follows_the_matrix_when_the_indexes_cannot_be_asked() -> None:
    """Three pinned minors, no index answering: the newest the row's wheels are known (from the matrix) to
    exist for, as for the host's own interpreters."""
    choice = pick_python(ROW, DEAD, "x86_64", "2.31", found=[], builds=builds("3.10", "3.11", "3.12"), deadline=0.5)
    assert choice.managed is not None
    assert all(choice.managed.minor in ROW.wheel_pythons[n] for n in ROW.wheel_pythons)


def test_no_pinned_build_for_this_arch_is_the_old_error_with_its_hint() -> None:
    with pytest.raises(AscendSetupError) as caught:
        pick_python(ROW, DEAD, "aarch64", "2.31", found=host("3.8.10"), builds=builds("3.11"), deadline=0.5)
    assert "no pinned CPython build for aarch64" in caught.value.message and "--python" in (caught.value.hint or "")


def test_the_packaged_builds_cover_the_rows_pythons_on_both_arches() -> None:
    packaged = load_builds()
    for arch in ("x86_64", "aarch64"):
        assert set(row_minors(ROW)) <= set(packaged.minors(arch)), arch
    for b in packaged.builds:
        assert b.file.startswith(f"cpython-{b.version}+{b.build}-{b.arch}-unknown-linux-gnu-install_only_stripped")
    assert len({b.sha256 for b in packaged.builds}) == len(packaged.builds)
    assert packaged.prefixes()[0] == packaged.release  # the official release first, then the mirrors
    assert packaged.prefixes("https://my.mirror/pbs/")[0] == "https://my.mirror/pbs"
    assert PACKAGED_BUILDS.name == "python_builds.json"


def test_urls_and_the_uv_listing(tmp_path: Path) -> None:
    b = builds("3.11").builds[0]
    assert b.url("https://m/x/") == f"https://m/x/20990101/cpython-3.11.4%2B20990101-x86_64-{b.file.split('-', 3)[3]}"
    assert b.key == "cpython-3.11.4-linux-x86_64-gnu"
    assert b.python_in(tmp_path) == tmp_path / b.key / "bin" / "python3.11"
    listing = uv_downloads_json(b, tmp_path / b.file)
    (entry,) = listing.values()
    assert json.loads(json.dumps(listing))  # what uv reads: plain JSON
    assert entry["url"] == (tmp_path / b.file).as_uri() and entry["sha256"] == b.sha256
    assert (entry["major"], entry["minor"], entry["patch"], entry["libc"]) == (3, 11, 4, "gnu")


def test_doctor_warns_where_the_install_fetches_a_managed_python(tmp_path: Path) -> None:
    from ascend_setup.host.doctor_checks import check_python, managed_interpreters

    planned = Interpreter(path="", version="3.11.16", has_venv=True)  # decide_python's managed choice
    check = check_python(ROW, [Interpreter("/usr/bin/python3.8", "3.8.10", True)], planned)
    assert check.status == "warn" and "managed CPython 3.11.16" in check.detail and "--python-mirror" in check.fix
    bare = check_python(ROW, [Interpreter("/usr/bin/python3.8", "3.8.10", True)], None)
    assert bare.status == "fail"
    for name in ("python3.11", "python3.11-config", "python3", "python"):
        path = tmp_path / "cpython-3.11.16-linux-x86_64-gnu" / "bin" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    assert managed_interpreters(tmp_path) == [str(tmp_path / "cpython-3.11.16-linux-x86_64-gnu/bin/python3.11")]
