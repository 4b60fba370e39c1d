"""Names are names: every name a file gives that becomes a path (a builds file's `file`, from --python-builds or
inside a bundle; a bundle manifest's entry; a lock's file; a tar member, a link member among them) is refused
when it leaves its folder: `../` up to a sentinel file outside, or that file's absolute path. Generated over
every kind and every command that reads it, through the CLI: exit 2 with one line naming the field, the
sentinel byte-identical, and nothing new anywhere (`install --bundle` checks the whole bundle before it makes
a folder or unpacks a byte)."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
from helpers.cli import assert_one_line_error
from helpers.handmade_bundle import SOC, add_file, add_link, make_bundle, tar_of

from ascend_setup.matrix import load_matrix
from ascend_setup.steps.options import check_bundle_for_host

SENTINEL = b"the user's own file\n"
#: (case dir, the hostile name for a field joined to a folder) -> (argv, the words that name the field)
Setup = Callable[[Path, Callable[[Path], str]], Tuple[List[str], str]]


def _install(case: Path, *extra: str) -> List[str]:
    return ["install", "--cann", "9.1.0", "--workdir", str(case / "wd"), "--soc", SOC, "--yes", *extra]


def _set_build_file(name: str) -> Callable[[Dict[str, Any]], None]:
    return lambda doc: doc["builds"][0].update(file=name)


def python_builds_flag(case: Path, hostile: Callable[[Path], str]) -> Tuple[List[str], str]:
    import json

    from helpers.handmade_bundle import builds_doc

    doc = builds_doc(b"archive")
    _set_build_file(hostile(case / "wd" / "downloads" / "python"))(doc)
    (case / "builds.json").write_text(json.dumps(doc))
    return _install(case, "--python-builds", str(case / "builds.json")), "builds.0.file"


def _bundle_case(
    command: str,
    as_tar: bool,
    field: str,
    edit: Callable[[Path, Callable[[Path], str]], Dict[str, Any]],
    extra: Callable[[Path, Callable[[Path], str]], Any] = lambda b, h: None,
) -> Setup:
    """A bundle (directory or tar) with one part made hostile, read by `install --bundle` or `bundle verify`."""

    def setup(case: Path, hostile: Callable[[Path], str]) -> Tuple[List[str], str]:
        root = make_bundle(case / "bundle", **edit(case / "bundle", hostile))
        given = tar_of(root, case / "bundle.tar", extra=extra(root, hostile)) if as_tar else root
        if as_tar:
            import shutil

            shutil.rmtree(root)  # only the tar is given
        argv = _install(case, "--bundle", str(given)) if command == "install" else ["bundle", "verify", str(given)]
        return argv, field

    return setup


def _builds_in_bundle(root: Path, hostile: Callable[[Path], str]) -> Dict[str, Any]:
    return {"builds": _set_build_file(hostile(root / "python"))}


def _manifest_entry(root: Path, hostile: Callable[[Path], str]) -> Dict[str, Any]:
    return {"manifest": lambda doc: doc["files"][1].update(path=hostile(root))}


def _lock_file(root: Path, hostile: Callable[[Path], str]) -> Dict[str, Any]:
    return {"lock": lambda doc: doc["packages"][0].update(file=hostile(root / "files"))}


def _member(kind: str) -> Callable[[Path, Callable[[Path], str]], Callable[[tarfile.TarFile], None]]:
    """An extra member of the tar: a file whose name is hostile, or a link (named files/evil) whose target is."""

    def extra(root: Path, hostile: Callable[[Path], str]) -> Callable[[tarfile.TarFile], None]:
        unpacked = root.parent / "wd" / ".unpacking-bundle"  # where install --bundle would unpack it
        if kind == "file":
            return lambda archive: add_file(archive, hostile(unpacked))
        return lambda archive: add_link(archive, "files/evil", hostile(unpacked / "files"), hard=kind == "hardlink")

    return extra


def _none(root: Path, hostile: Callable[[Path], str]) -> Dict[str, Any]:
    return {}


KINDS: Dict[str, Setup] = {"python-builds:--python-builds": python_builds_flag}
for _command in ("install", "verify"):
    for _as_tar in (False, True):
        _form = "tar" if _as_tar else "dir"
        KINDS[f"manifest-entry:{_command}:{_form}"] = _bundle_case(_command, _as_tar, "files.1.path", _manifest_entry)
        if _command == "install":
            KINDS[f"bundle-builds:install:{_form}"] = _bundle_case(
                _command, _as_tar, "builds.0.file", _builds_in_bundle
            )
            KINDS[f"lock-file:install:{_form}"] = _bundle_case(_command, _as_tar, "packages.0.file", _lock_file)
        if _as_tar:
            KINDS[f"tar-member:{_command}"] = _bundle_case(_command, True, "member", _none, _member("file"))
            KINDS[f"tar-symlink:{_command}"] = _bundle_case(
                _command, True, "member 'files/evil'", _none, _member("symlink")
            )
            KINDS[f"tar-hardlink:{_command}"] = _bundle_case(
                _command, True, "member 'files/evil'", _none, _member("hardlink")
            )

#: How a name leaves its folder: climbing to the sentinel, or naming it from /.
NAMES: Dict[str, Callable[[Path], Callable[[Path], str]]] = {
    "climbs": lambda sentinel: lambda base: os.path.relpath(sentinel, base),
    "absolute": lambda sentinel: lambda base: str(sentinel),
}


def _everything(root: Path) -> Dict[str, bytes]:
    """Every path under `root` (folders and links too), with a file's bytes."""
    return {
        str(p): (
            p.read_bytes()
            if p.is_file() and not p.is_symlink()
            else b"<%s>" % p.stat(follow_symlinks=False).st_mode.to_bytes(4, "big")
        )
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_name_that_leaves_its_folder_is_refused_naming_the_field(cli, tmp_path: Path, kind: str, name: str) -> None:
    world = tmp_path / "world"
    sentinel = world / "outside" / "sentinel.txt"
    sentinel.parent.mkdir(parents=True)
    sentinel.write_bytes(SENTINEL)
    case = world / "case"
    case.mkdir()
    argv, field = KINDS[kind](case, NAMES[name](sentinel))
    before = _everything(world)
    proc = cli(*argv, timeout=120)
    line = assert_one_line_error(proc, 2)
    assert field in line, line
    assert sentinel.read_bytes() == SENTINEL
    assert _everything(world) == before  # nothing new, nothing changed: not even the workdir


def test_a_bundle_folder_linked_out_is_refused_by_verify_and_install(cli, tmp_path: Path) -> None:
    """A directory bundle whose files/ is a link to a folder elsewhere: its entries' names are fine, the paths
    they lead to are not inside the bundle."""
    root = make_bundle(tmp_path / "bundle")
    elsewhere = tmp_path / "elsewhere"
    (root / "files").rename(elsewhere)
    (root / "files").symlink_to(elsewhere)
    for argv in (["bundle", "verify", str(root)], _install(tmp_path, "--bundle", str(root))):
        line = assert_one_line_error(cli(*argv), 2)
        assert "files.1.path" in line and "leads outside" in line, line
    assert not (tmp_path / "wd").exists()


@pytest.mark.parametrize("as_tar", [False, True], ids=["dir", "tar"])
def test_the_handmade_bundle_passes_the_checks_the_hostile_ones_fail(tmp_path: Path, as_tar: bool) -> None:
    """The baseline: without it a refusal above could be the bundle's fault, not the planted name's."""
    import platform

    root = make_bundle(tmp_path / "bundle")
    given = tar_of(root, tmp_path / "bundle.tar") if as_tar else root
    row = load_matrix().rows["9.1.0"].for_arch(platform.machine())
    check_bundle_for_host(str(given), "9.1.0", row, SOC, None)


def test_a_lock_that_is_not_a_lock_is_refused_before_a_folder_is_made(cli, tmp_path: Path) -> None:
    """The issue's case: the tar was unpacked into a new folder before its lock was found wrong."""
    root = make_bundle(tmp_path / "bundle")
    (root / "lock.txt").write_text("not a lock\n")
    tar = tar_of(root, tmp_path / "bundle.tar")
    line = assert_one_line_error(cli(*_install(tmp_path, "--bundle", str(tar))), 2)
    assert "lock.txt is not an ascend-setup lock" in line, line
    assert not (tmp_path / "wd").exists()


@pytest.mark.parametrize("name", ["../outside/sentinel.txt", "/etc/passwd", "sub/../../outside/sentinel.txt"])
def test_a_hub_listing_that_names_a_path_outside_the_model_is_refused_before_a_request(
    tmp_path: Path, name: str
) -> None:
    """model fetch joins each listed file to the model's folder: a hub (or a mirror answering for it) that
    lists one outside is refused, nothing asked of the network."""
    from ascend_setup.errors import BadInput
    from ascend_setup.hub.base import RemoteFile
    from ascend_setup.hub.fetch import fetch_files

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "sentinel.txt").write_bytes(SENTINEL)
    asked: List[str] = []
    with pytest.raises(BadInput, match="the hub's listing"):
        fetch_files([RemoteFile(name, 1)], tmp_path / "model", lambda path: asked.append(path) or "http://127.0.0.1:9/")
    assert asked == [] and (tmp_path / "outside" / "sentinel.txt").read_bytes() == SENTINEL
    assert not (tmp_path / "model").exists()
