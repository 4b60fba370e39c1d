"""read_venv keeps its last reading of a venv while the venv's fingerprint is unchanged. Generated over every kind of
change a user or a step makes between two readings: each is seen by the next reading, and a memo blind to it would
have answered the reading before the change."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
from helpers.fake_dists import fake_install, make_venv, site_of

from ascend_setup.dists import installed
from ascend_setup.dists.installed import read_venv
from ascend_setup.errors import BadInput


def _venv(tmp_path: Path) -> Path:
    venv = make_venv(tmp_path / "v")
    fake_install(venv, "foo", "1.0", requires=["bar>=2"])
    fake_install(venv, "bar", "2.0")
    return venv


def _settled(venv: Path) -> None:
    """Waits out the tick within which read_venv does not trust a fingerprint (a second change in it may leave the
    stamps as the first left them), so that the reading that follows is kept, or compared by its fingerprint."""
    deadline = time.monotonic() + 10
    while installed._fingerprint(venv) is None:
        assert time.monotonic() < deadline, "the fingerprint never settled"
        time.sleep(0.01)


def _summary(venv: Path) -> Dict[str, Any]:
    try:
        contents = read_venv(venv)
    except BadInput as exc:
        return {"error": exc.message}
    return {
        "dists": sorted((d.name, d.version) for d in contents.dists),
        "config": contents.config,
        "damaged": sorted(f"{p.parent.name}/{p.name}" for p, _ in contents.damaged),
        "nameless": sorted(p.name for p in contents.nameless),
    }


def _foo(venv: Path, member: str) -> Path:
    return site_of(venv) / "foo-1.0.dist-info" / member


def _rewrite_same_size(path: Path, old: str, new: str) -> None:
    """In place, the same size, its mtime put back: only st_ctime_ns tells."""
    assert len(old) == len(new)
    before = path.stat()
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def _replace_by_rename(venv: Path) -> None:
    path = _foo(venv, "METADATA")
    new = path.with_name("METADATA.new")
    new.write_text(path.read_text().replace("Version: 1.0", "Version: 1.2"))
    before = path.stat()
    os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(new, path)


def _symlink(venv: Path) -> None:
    path = _foo(venv, "RECORD")
    shutil.copy2(path, path.with_name("RECORD.orig"))
    path.unlink()
    path.symlink_to("RECORD.orig")  # the same text, through a link


def _fifo(venv: Path) -> None:
    path = _foo(venv, "INSTALLER")
    path.unlink()
    os.mkfifo(path)


def _binary(venv: Path) -> None:
    path = _foo(venv, "WHEEL")
    path.write_bytes(b"\xff" * path.stat().st_size)


def _edit_pyvenv_cfg(venv: Path) -> None:
    cfg = venv / "pyvenv.cfg"
    version = next(line for line in cfg.read_text().splitlines() if line.startswith("version"))
    _rewrite_same_size(cfg, version, "version = " + "9" * (len(version) - len("version = ")))


CHANGES: Dict[str, Callable[[Path], None]] = {
    "a distribution added": lambda venv: fake_install(venv, "baz", "3.0"),
    "a distribution removed": lambda venv: shutil.rmtree(site_of(venv) / "bar-2.0.dist-info"),
    "a member edited in place, same size": lambda venv: _rewrite_same_size(
        _foo(venv, "METADATA"), "Version: 1.0", "Version: 1.1"
    ),
    "a member replaced by rename": _replace_by_rename,
    "a member made a symlink": _symlink,
    "a member made a FIFO": _fifo,
    "a member made binary": _binary,
    "METADATA deleted": lambda venv: _foo(venv, "METADATA").unlink(),
    "pyvenv.cfg edited": _edit_pyvenv_cfg,
    "bin/python removed": lambda venv: (venv / "bin" / "python").unlink(),
}

SEEN: Dict[str, Callable[[Dict[str, Any]], bool]] = {
    "a distribution added": lambda s: ("baz", "3.0") in s["dists"],
    "a distribution removed": lambda s: [n for n, _ in s["dists"]] == ["foo"],
    "a member edited in place, same size": lambda s: ("foo", "1.1") in s["dists"],
    "a member replaced by rename": lambda s: ("foo", "1.2") in s["dists"],
    "a member made a symlink": lambda s: s["damaged"] == ["foo-1.0.dist-info/RECORD"],
    "a member made a FIFO": lambda s: s["damaged"] == ["foo-1.0.dist-info/INSTALLER"],
    "a member made binary": lambda s: s["damaged"] == ["foo-1.0.dist-info/WHEEL"],
    "METADATA deleted": lambda s: s["nameless"] == ["foo-1.0.dist-info"] and [n for n, _ in s["dists"]] == ["bar"],
    "pyvenv.cfg edited": lambda s: set(s["config"]["version"]) == {"9"},
    "bin/python removed": lambda s: "is not a working venv" in s.get("error", ""),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_reading_after_a_change_sees_it(tmp_path: Path, monkeypatch, change: str) -> None:
    venv = _venv(tmp_path)
    _settled(venv)
    before = _summary(venv)
    kept = installed._LAST_READING[venv]  # the reading was kept: the next one may be answered from it

    CHANGES[change](venv)
    _settled(venv)  # the fingerprint alone must tell, not the freshness of a stamp
    with monkeypatch.context() as blind:  # a memo that ignored the change answers the reading before it
        blind.setattr(installed, "_fingerprint", lambda root: kept[0])
        assert _summary(venv) == before and not SEEN[change](before)
    assert installed._fingerprint(venv) != kept[0]
    assert SEEN[change](_summary(venv)), _summary(venv)


def _counting_reads(monkeypatch) -> List[Path]:
    calls: List[Path] = []
    real = installed._read_members

    def counted(meta: Path) -> Any:
        calls.append(meta)
        return real(meta)

    monkeypatch.setattr(installed, "_read_members", counted)
    return calls


def test_an_unchanged_venv_is_not_read_again(tmp_path: Path, monkeypatch) -> None:
    venv = _venv(tmp_path)
    _settled(venv)
    calls = _counting_reads(monkeypatch)
    first = read_venv(venv)
    assert len(calls) == 2
    assert read_venv(venv) == first and len(calls) == 2
    # a caller that changes its reading changes neither the kept one nor the next caller's
    first.dists[0].requires.append("evil")
    first.dists.clear()
    first.config["home"] = "elsewhere"
    again = read_venv(venv)
    assert [d.name for d in again.dists] == ["bar", "foo"] and again.get("foo").requires == ["bar>=2"]
    assert again.config["home"] != "elsewhere" and len(calls) == 2


def test_a_fresh_stamp_is_not_trusted(tmp_path: Path, monkeypatch) -> None:
    """A change within the filesystem's tick of the last may leave every stamp as it was: then it is read again."""
    venv = _venv(tmp_path)
    monkeypatch.setattr(installed, "_TICK_NS", 10**18)  # every stamp is within the tick
    calls = _counting_reads(monkeypatch)
    read_venv(venv)
    read_venv(venv)
    assert len(calls) == 4 and venv not in installed._LAST_READING


def test_bad_input_is_refused_each_time_and_few_venvs_are_kept(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    (venv / "bin" / "python").unlink()
    _settled(venv)
    for _ in range(2):
        with pytest.raises(BadInput, match="is not a working venv"):
            read_venv(venv)
    assert venv not in installed._LAST_READING
    for i in range(installed._ROOTS_KEPT + 2):
        other = make_venv(tmp_path / f"w{i}")
        _settled(other)
        read_venv(other)
    assert len(installed._LAST_READING) == installed._ROOTS_KEPT and other in installed._LAST_READING
