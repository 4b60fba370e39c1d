"""The tool's own wheel in a bundle when the tool was installed with `pip install .` (the README's way): no
source tree is there, so the installed files are packed back into the wheel they came from. It must be that
wheel (same members, same bytes), the same bytes twice, installable, and refused when a file was changed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import sysconfig
import venv as venv_module
import zipfile
from pathlib import Path

import pytest

from ascend_setup.bundle.tool import build_tool_wheel, source_tree

REPO = Path(__file__).resolve().parents[2]
PACK = (
    "import sys; from pathlib import Path; from ascend_setup.bundle.tool import source_tree, tool_wheel; "
    "assert source_tree() is None, source_tree(); print(tool_wheel(Path(sys.argv[1]), Path(sys.argv[2])))"
)


def _members(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple:
    """(a venv with the tool installed from its wheel, not editable; that wheel; an env whose PYTHONPATH gives
    the tool's dependencies from this interpreter, which is not a site dir, so the editable .pth is not read)."""
    root = tmp_path_factory.mktemp("tool-wheel")
    built = build_tool_wheel(REPO, root / "built", root / "build.log")
    venv = root / "venv"
    venv_module.create(venv, with_pip=True)
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(built),
        ],
        check=True,
        timeout=300,
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": sysconfig.get_paths()["purelib"], "HOME": str(root)}
    return venv, built, env


def _pack(installed: tuple, out: Path) -> subprocess.CompletedProcess:
    venv, _, env = installed
    out.mkdir()
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", PACK, str(out), str(out / "log")],
        env=env,
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
    )  # cwd: `-c` puts it first on sys.path


def test_a_checkout_builds_from_its_tree() -> None:
    assert source_tree() == REPO


def test_an_installed_tool_packs_back_into_the_wheel_it_came_from(installed: tuple, tmp_path: Path) -> None:
    first, second = _pack(installed, tmp_path / "a"), _pack(installed, tmp_path / "b")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    wheel_a, wheel_b = Path(first.stdout.strip()), Path(second.stdout.strip())
    built = _members(installed[1])
    packed = _members(wheel_a)
    assert wheel_a.name == installed[1].name
    record = next(n for n in built if n.endswith(".dist-info/RECORD"))
    assert set(packed) == set(built)
    assert {n: d for n, d in packed.items() if n != record} == {n: d for n, d in built.items() if n != record}
    assert sorted(packed[record].splitlines()) == sorted(built[record].splitlines())
    assert hashlib.sha256(wheel_a.read_bytes()).digest() == hashlib.sha256(wheel_b.read_bytes()).digest()
    target = tmp_path / "target"
    venv_module.create(target, with_pip=True)
    subprocess.run(
        [
            str(target / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel_a),
        ],
        check=True,
        timeout=300,
    )
    assert (target / "bin" / "ascend-setup").is_file()  # the console script comes back from entry_points.txt


def test_a_file_changed_since_the_install_is_refused_not_shipped(installed: tuple, tmp_path: Path) -> None:
    venv = installed[0]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    changed = venv / "lib" / version / "site-packages" / "ascend_setup" / "matrix" / "soc.py"
    original = changed.read_bytes()
    changed.write_bytes(original + b"\n# edited after the install\n")
    try:
        proc = _pack(installed, tmp_path / "c")
    finally:
        changed.write_bytes(original)
    assert proc.returncode != 0
    assert f"{changed} differs from what ascend-setup" in proc.stderr
    assert not list((tmp_path / "c").glob("*.whl*"))  # nothing half-written left behind
