"""A stop mid-install can leave any file of a distribution unwritten. Generated over every file a real uv
install leaves (each RECORD row, the dist-info's own files, the console script), one case each: the damage
check names the distribution, and the repair the install runs (the nameless dist-info removed, a forced
reinstall) gives back a distribution that imports and matches its RECORD.

The case that reached CI: uv stopped with pip's dist-info written but its METADATA not, and pip's own
package half there. Our reader could not name that dist-info, so nothing was repaired, while uv counted pip
as installed by the folder's name and skipped it: the next step's `python -m pip` found no pip._internal."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from ascend_setup.dists.installed import read_venv
from ascend_setup.dists.installers import uv_command
from ascend_setup.dists.record import check_dist, damage_in
from ascend_setup.dists.venv_reader import site_packages
from ascend_setup.simulate.dists import build_wheel

NAME = "torn-pkg"


def _uv_install(venv: Path, wheel: Path, *flags: str) -> None:
    subprocess.run(
        [
            *uv_command(),
            "pip",
            "install",
            "--python",
            str(venv / "bin" / "python"),
            "--no-config",
            "--offline",
            "--no-deps",
            *flags,
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )


def _make(root: Path):
    """A venv with the stub distribution installed by real uv: a package, a module, a console script."""
    wheel = build_wheel(
        root / "wheels",
        NAME,
        "1.0",
        files={
            "torn_pkg/__init__.py": "from torn_pkg.core import VALUE\n",
            "torn_pkg/core.py": "VALUE = 42\n",
            "torn_pkg-1.0.data/scripts/torn-tool": "#!python\nprint('ok')\n",
        },
    )
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    _uv_install(venv, wheel)
    return venv, wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    return _make(tmp_path_factory.mktemp("torn"))


def _cases() -> List[str]:
    """Every path the RECORD of a throwaway install names (computed at collection)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        venv, _ = _make(Path(tmp))
        (site,) = site_packages(venv)
        (info,) = site.glob("torn_pkg-*.dist-info")
        rows = csv.reader((info / "RECORD").read_text().splitlines())
        return sorted({row[0] for row in rows if row and row[0]})


def _copy(venv: Path, dest: Path) -> Path:
    """A new venv holding `venv`'s site-packages and script, as files of its own; its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    (site,) = site_packages(venv)
    (copy_site,) = site_packages(dest)
    shutil.copytree(site, copy_site, dirs_exist_ok=True, symlinks=True)
    shutil.copy2(venv / "bin" / "torn-tool", dest / "bin" / "torn-tool")
    return copy_site


@pytest.mark.parametrize("missing", _cases())
def test_any_file_a_stop_left_unwritten_is_seen_and_repaired(installed, tmp_path: Path, missing: str) -> None:
    venv, wheel = installed
    copy = tmp_path / "venv"
    copy_site = _copy(venv, copy)
    (copy_site / missing).unlink()  # RECORD paths are relative to site-packages (../../../bin for scripts)

    found = damage_in(read_venv(copy), {"torn-pkg"})
    assert [d.name for d in found] == ["torn-pkg"], missing
    for d in found:  # as the install's repair does: what cannot be uninstalled goes first
        if not d.record_readable:
            shutil.rmtree(d.dist_info)
    _uv_install(copy, wheel, "--force-reinstall")
    assert damage_in(read_venv(copy), {"torn-pkg"}) == []
    (info,) = copy_site.glob("torn_pkg-*.dist-info")
    assert check_dist("torn-pkg", info) is None
    out = subprocess.run(
        [str(copy / "bin" / "python"), "-c", "import torn_pkg; print(torn_pkg.VALUE)"], capture_output=True, text=True
    )
    assert out.stdout.strip() == "42", (missing, out.stderr)


def test_uv_counts_a_dist_info_without_metadata_as_installed(installed, tmp_path: Path) -> None:
    """The real behaviour the repair exists for (if uv ever stops doing this, the removal is still harmless)."""
    venv, wheel = installed
    copy = tmp_path / "venv"
    copy_site = _copy(venv, copy)
    (info,) = copy_site.glob("torn_pkg-*.dist-info")
    (info / "METADATA").unlink()
    (copy_site / "torn_pkg" / "core.py").unlink()
    assert read_venv(copy).nameless == [info]
    _uv_install(copy, wheel)
    assert not (copy_site / "torn_pkg" / "core.py").exists()
