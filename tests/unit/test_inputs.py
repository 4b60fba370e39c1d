"""inputs.py: the one reader every file input goes through. Each bound is checked where it bites."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import pytest
from helpers.hostile import SPECIAL, plant_special

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import MAX_DEPTH, check_yaml_shape, load_json, parse_json, read_input_text


def test_depth_is_bounded_but_strings_with_brackets_are_not_nesting() -> None:
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None
    with pytest.raises(BadInput, match="nests deeper"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x")
    assert parse_json('{"a": "' + "[" * 500 + '\\"["}', "x") == {"a": "[" * 500 + '"['}


def test_numbers_are_bounded_and_nan_is_refused() -> None:
    assert parse_json('{"n": 12345678901234567890}', "x")["n"] == 12345678901234567890
    with pytest.raises(BadInput, match="5000-digit"):
        parse_json('{"n": ' + "9" * 5000 + "}", "state file s")
    for token in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(BadInput, match=token):
            parse_json('{"gbps": %s}' % token, "probe")


def test_yaml_depth_aliases_and_long_integers() -> None:
    check_yaml_shape("a:\n  b:\n    - 1\n", "m")
    for depth in (MAX_DEPTH + 1, 100_000):  # ours, and libyaml's own bound past 1000
        with pytest.raises(BadInput, match="nests deeper"):
            check_yaml_shape("[" * depth + "]" * depth, "m")
    check_yaml_shape("a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 40)) + "  " * 40 + "v\n", "m")
    bomb = "a: &a [x, x]\n" + "".join(f"b{i}: &b{i} [*a, *a]\n" for i in range(600))
    with pytest.raises(BadInput, match="aliases"):
        check_yaml_shape(bomb, "m")
    with pytest.raises(BadInput, match="digit"):
        check_yaml_shape("n: " + "1" * 5000 + "\n", "m")


def _doubling(levels: int, width: int = 2) -> str:
    """Each level an anchored list of `width` aliases of the one below: width**levels nodes, expanded."""
    lines = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _groups(levels: int) -> str:
    """An Ansible inventory whose groups are each other's children twice over, `levels` deep (2**levels walks)."""
    lines = ["g0: &g0 {hosts: {h: }}"] + [
        f"g{i}: &g{i} {{children: {{a: *g{i - 1}, b: *g{i - 1}}}}}" for i in range(1, levels + 1)
    ]
    return "\n".join(lines) + "\n"


YAML_BOMBS = {
    "30 levels doubling (2^30 nodes, 60 aliases)": (_doubling(30), "expand to more than"),
    "billion laughs (9 levels of 10)": (_doubling(9, 10), "expand to more than"),
    "groups aliasing each other 30 deep": (_groups(30), "expand to more than"),
    "a list that holds itself": ("a: &a [x, *a]\n", "a cycle"),
    "a mapping that holds itself": ("a: &a {b: *a}\n", "a cycle"),
    "an alias inside a flow sequence of itself": ("a: &a [[[*a]]]\n", "a cycle"),
}


@pytest.mark.parametrize("text, said", YAML_BOMBS.values(), ids=list(YAML_BOMBS))
def test_a_yaml_alias_bomb_or_cycle_is_refused_at_parse(text: str, said: str) -> None:
    import time

    start = time.monotonic()
    with pytest.raises(BadInput, match=said):
        check_yaml_shape(text, "m")
    assert time.monotonic() - start < 5  # refused from the events, never expanded


def test_aliases_within_the_bound_are_kept() -> None:
    """Real files use anchors (the packaged matrix does): 10 levels of doubling (1024 nodes) pass."""
    check_yaml_shape(_doubling(10), "m")
    check_yaml_shape("base: &b {x: 1}\nrow: {<<: *b, y: 2}\n", "m")


def test_special_files_sizes_links_and_encodings(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="is a FIFO"):
        read_input_text(fifo, "lock")  # returns at once: the open is non-blocking
    with pytest.raises(BadInput, match="is a device"):
        read_input_text("/dev/zero", "fleet")
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(65 * 1024)
    with pytest.raises(BadInput, match="more than"):
        read_input_text(big, "probe")
    binary = tmp_path / "bin"
    binary.write_bytes(b"ok\xff\xfe")
    with pytest.raises(BadInput, match="byte 2 is 0xff"):
        read_input_text(binary, "state")
    good = tmp_path / "good.json"
    good.write_text('{"a": 1}')
    link = tmp_path / "link.json"
    link.symlink_to(good)
    assert load_json(link, "state") == {"a": 1}  # a link the user named is followed
    with pytest.raises(BadInput, match="symbolic link"):
        load_json(link, "state", follow=False)  # one in a workdir is not


def _host_readers() -> Dict[str, Tuple[str, Callable[[Path], Any]]]:
    """Every reader of a host's own small files: (where under tmp the file is, how it is read from tmp)."""
    from ascend_setup.container.facts import container_signals, passwd_entry
    from ascend_setup.engine.login import install_block
    from ascend_setup.host.cann import read_key_values
    from ascend_setup.nodes.node_facts import listening
    from ascend_setup.utils.osrelease import os_release

    return {
        "version.info": ("version.info", lambda tmp: read_key_values(tmp / "version.info")),
        "os-release": ("os-release", lambda tmp: os_release(tmp / "os-release")),
        "root/etc/passwd": ("root/etc/passwd", lambda tmp: passwd_entry(tmp / "root", 0)),
        "root/proc/1/cgroup": ("root/proc/1/cgroup", lambda tmp: container_signals(tmp / "root")),
        "proc/net/tcp": ("net/tcp", lambda tmp: listening(tmp / "net")),
        "~/.bashrc": ("home/.bashrc", lambda tmp: install_block(tmp / "wd", home=str(tmp / "home"))),
    }


@pytest.mark.parametrize("how", SPECIAL)
@pytest.mark.parametrize("reader", list(_host_readers()))
def test_every_host_reader_is_bounded(tmp_path: Path, reader: str, how: str) -> None:
    """A FIFO hung these readers, /dev/zero filled memory: each is now one BadInput naming the file, at once."""
    import time

    member, read = _host_readers()[reader]
    plant_special(tmp_path / member, how)
    start = time.monotonic()
    with pytest.raises(BadInput) as caught:
        read(tmp_path)
    assert time.monotonic() - start < 5
    assert str(tmp_path / member) in caught.value.message and len(caught.value.one_line().splitlines()) == 1


def test_an_absent_or_unreadable_host_file_is_no_fact(tmp_path: Path) -> None:
    from ascend_setup.engine.login import remove_block
    from ascend_setup.host.cann import read_key_values

    assert read_key_values(tmp_path / "none") == {}
    os.mkfifo(tmp_path / ".bashrc")
    assert remove_block(tmp_path / "wd", home=str(tmp_path)) is False  # a FIFO holds no block of ours
    assert (tmp_path / ".bashrc").is_fifo()


@pytest.mark.parametrize("how", SPECIAL)
def test_a_hostile_kernel_meta_lock_holds_no_pid(tmp_path: Path, how: str) -> None:
    """doctor's stale-lock check reads each kernel_meta lock's pid: a FIFO there hung it; now it is no pid."""
    import time

    from ascend_setup.sourcebuild.kernel_meta import find_kernel_meta_locks

    plant_special(tmp_path / "op" / "kernel_meta" / "kernel_meta.lock", how)
    start = time.monotonic()
    locks = list(find_kernel_meta_locks(tmp_path))
    assert time.monotonic() - start < 5
    assert len(locks) == (1 if how in ("fifo", "huge") else 0)  # a link or a directory is no lock it reads
    assert all(lock.pid is None for lock in locks)
