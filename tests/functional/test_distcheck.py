"""RECORD checks of an installed distribution (what a kill mid-install leaves) and the --venv rules."""

from __future__ import annotations

import base64
import hashlib
import sys
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error

from ascend_setup.dists.record import HASH_LIMIT, check_dist
from ascend_setup.dists.venv_reader import VenvRecord, venv_target_kind, write_venv_record

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland


def _record_line(site: Path, rel: str) -> str:
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def _dist(site: Path, files: dict) -> Path:
    """A dist-info named demo-1.0 with `files` (relative path -> bytes) and a true RECORD."""
    info = site / "demo-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    lines = [_record_line(site, rel) for rel in [*files, "demo-1.0.dist-info/METADATA"]]
    lines += ["demo/__pycache__/__init__.cpython-311.pyc,,", "demo-1.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    return info


def test_whole_dist_passes_and_pyc_without_size_is_not_required(tmp_path: Path) -> None:
    info = _dist(tmp_path, {"demo/__init__.py": b"x = 1\n", "../../bin/demo": b"#!/bin/sh\n"})
    assert check_dist("demo", info) is None


def test_truncated_missing_and_same_size_other_content_are_found(tmp_path: Path) -> None:
    big = b"a" * (HASH_LIMIT + 10)
    info = _dist(
        tmp_path,
        {"demo/__init__.py": b"x = 1\n", "demo/core.py": b"y = 2\n", "demo/lib.so": big, "demo/util.py": b"z = 3\n"},
    )
    (tmp_path / "demo" / "__init__.py").write_bytes(b"x")  # truncated
    (tmp_path / "demo" / "core.py").unlink()  # never written
    (tmp_path / "demo" / "util.py").write_bytes(b"z = 4\n")  # another version's file, same size
    (tmp_path / "demo" / "lib.so").write_bytes(b"b" * len(big))  # large: judged by its size alone
    damage = check_dist("demo", info)
    assert damage is not None and damage.record_readable
    assert sorted(damage.problems) == [
        "demo/__init__.py has 1 bytes, RECORD says 6",
        "demo/core.py is missing",
        "demo/util.py differs from its RECORD sha256",
    ]
    assert damage.summary().startswith("demo: ") and "(+2 more)" in damage.summary()


def test_missing_record_is_damage_that_cannot_be_uninstalled(tmp_path: Path) -> None:
    info = _dist(tmp_path, {"demo/__init__.py": b"x = 1\n"})
    (info / "RECORD").unlink()
    damage = check_dist("demo", info)
    assert damage is not None and not damage.record_readable


# -- --venv: absent, empty, a venv; a foreign venv only with --adopt-venv; some places never -----------


def _install(cli, tmp_path: Path, venv: Path, *extra: str):
    return cli(
        "install",
        "--cann",
        "9.1.0",
        "--venv",
        str(venv),
        "--workdir",
        str(tmp_path / "w"),
        "--dry-run",
        "--mirror",
        "none",
        *extra,
    )


def _foreign_venv(path: Path) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    return path


def test_venv_kinds(tmp_path: Path) -> None:
    assert venv_target_kind(tmp_path / "absent") == "absent"
    (tmp_path / "empty").mkdir()
    assert venv_target_kind(tmp_path / "empty") == "empty"
    foreign = _foreign_venv(tmp_path / "foreign")
    assert venv_target_kind(foreign) == "foreign"
    write_venv_record(foreign, VenvRecord(workdir=str(tmp_path)))
    assert venv_target_kind(foreign) == "ours"
    (tmp_path / "stuff" / "bin").mkdir(parents=True)
    assert venv_target_kind(tmp_path / "stuff") == "not-venv"
    half = tmp_path / "half"  # killed between ascend-setup.json and pyvenv.cfg: still ours
    half.mkdir()
    write_venv_record(half, VenvRecord(workdir=str(tmp_path), created=True))
    assert venv_target_kind(half) == "ours"
    torn = tmp_path / "torn"  # killed while writing that record: only its temp file is there
    torn.mkdir()
    (torn / ".ascend-setup.json.k3j2.tmp").write_text("{")
    assert venv_target_kind(torn) == "empty"


def test_non_venv_directory_is_refused_untouched(cli, tmp_path: Path, home: Path) -> None:
    local = home / ".local-like"
    (local / "bin").mkdir(parents=True)
    (local / "bin" / "pip").write_text("#!/bin/sh\necho mine\n")
    line = assert_one_line_error(_install(cli, tmp_path, local))
    assert "not a venv" in line and str(local) in line
    assert (local / "bin" / "pip").read_text() == "#!/bin/sh\necho mine\n"
    assert not (tmp_path / "w").exists()


def test_foreign_venv_needs_adopt_venv_which_says_what_it_changes(cli, tmp_path: Path) -> None:
    foreign = _foreign_venv(tmp_path / "theirs")
    line = assert_one_line_error(_install(cli, tmp_path, foreign))
    assert "did not make" in line and "--adopt-venv" in line
    adopted = _install(cli, tmp_path, foreign, "--adopt-venv")
    assert "did not make" not in adopted.stderr and "Traceback" not in adopted.stderr
    assert f"adopting {foreign}" in adopted.stderr and "never deletes the venv" in adopted.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["bin", "pyvenv.cfg"]  # a dry run changes nothing


@pytest.mark.parametrize("where", ["own", "base", "dot-local", "usr"])
def test_places_that_are_never_a_target(cli, tmp_path: Path, home: Path, where: str) -> None:
    venv = {"own": Path(sys.prefix), "base": Path(sys.base_prefix), "dot-local": home / ".local", "usr": Path("/usr")}[
        where
    ]
    if where == "dot-local":
        (venv / "bin").mkdir(parents=True)
    line = assert_one_line_error(_install(cli, tmp_path, venv, "--adopt-venv"))
    assert "never installs into it" in line, line


def test_a_short_written_bytecode_cache_is_dropped_and_the_module_imports_again(tmp_path: Path) -> None:
    """What a full disk leaves: a .pyc whose header is valid and whose body was cut short. Python then fails
    every import of the module (`marshal data too short`); dropping the caches beside the RECORD's sources
    lets it import, rebuilt from source."""
    import py_compile
    import subprocess

    from ascend_setup.dists.record import drop_bytecode

    site = tmp_path / "site"
    info = _dist(site, {"demo/__init__.py": b"", "demo/mod.py": b"VALUE = 42\n" + b"# padding\n" * 400})
    pyc = Path(py_compile.compile(str(site / "demo" / "mod.py"), doraise=True))
    pyc.write_bytes(pyc.read_bytes()[:24])  # header intact, body short
    probe = [sys.executable, "-c", "import demo.mod; print(demo.mod.VALUE)"]
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    before = subprocess.run(probe, capture_output=True, text=True, env=env)
    assert before.returncode != 0 and "marshal data too short" in before.stderr
    assert drop_bytecode(info) >= 1 and not pyc.exists()
    after = subprocess.run(probe, capture_output=True, text=True, env=env)
    assert after.returncode == 0 and after.stdout.strip() == "42", after.stderr
