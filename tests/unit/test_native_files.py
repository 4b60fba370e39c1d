"""The native reader's loaded files, hostile: a generated table of damaged shared objects (each one finding of the
venv's check, no traceback, no hang) and of damaged ldconfig caches (each read as no cache), in process. The
shared object mutated is native_stubs.minimal_library, written byte by byte, so no compiler is needed here."""

from __future__ import annotations

import os
import random
import signal
import struct
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

from ascend_setup.dists.installed import read_venv
from ascend_setup.native.elf import DamagedElf, read_needs
from ascend_setup.native.ldcache import NEW_MAGIC, OLD_MAGIC, conf_dirs, parse_cache, read_cache
from ascend_setup.native.loader import Target
from ascend_setup.native.venv_libs import check_venv
from ascend_setup.simulate.native_stubs import minimal_library

BASE = minimal_library()
SITE = "lib/python3.11/site-packages"
TARGET = Target(glibc="2.31", library_path=(), cache={}, system_dirs=(), label="the target")


@contextmanager
def no_hang(seconds: int = 10) -> Iterator[None]:
    """A check that does not finish in `seconds` is a hang: SIGALRM fails the test instead of stalling it."""

    def expired(signum, frame):
        raise AssertionError(f"no answer within {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _patch(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


_SHOFF = struct.unpack_from("<Q", BASE, 40)[0]


def _section(n: int) -> int:
    """Where section header n starts."""
    return _SHOFF + 64 * n


#: name -> the damaged bytes. Sections of minimal_library: 1 .dynstr, 2 .dynamic (links 1), 3 .shstrtab.
HOSTILE: Dict[str, Callable[[], bytes]] = {
    "empty": lambda: b"",
    "two bytes": lambda: BASE[:2],
    "not ELF": lambda: b"GNU ld script\nGROUP ( libc.so.6 )\n",
    "truncated in the identification": lambda: BASE[:12],
    "truncated in the header": lambda: BASE[:40],
    "truncated before the section table": lambda: BASE[: _SHOFF + 10],
    "truncated in the section table": lambda: BASE[: _SHOFF + 64 * 2 + 30],
    "unknown class": lambda: BASE[:4] + b"\x07" + BASE[5:],
    "unknown data encoding": lambda: BASE[:5] + b"\x09" + BASE[6:],
    "section table past the end": lambda: _patch(BASE, 40, "<Q", 10**12),
    "65535 sections": lambda: _patch(BASE, 60, "<H", 0xFFFF),
    "section headers too small": lambda: _patch(BASE, 58, "<H", 8),
    "no section headers": lambda: _patch(BASE, 40, "<Q", 0),
    "extended count past the end": lambda: _patch(_patch(BASE, 60, "<H", 0), _section(0) + 32, "<Q", 10**9),
    "dynamic longer than the file": lambda: _patch(BASE, _section(2) + 32, "<Q", 10**9),
    "dynamic past the end": lambda: _patch(BASE, _section(2) + 24, "<Q", 10**9),
    "dynamic of 2 GiB": lambda: _patch(BASE, _section(2) + 32, "<Q", 2**31),
    "string table link to nowhere": lambda: _patch(BASE, _section(2) + 40, "<I", 999),
    "string table linked to itself as 0": lambda: _patch(BASE, _section(2) + 40, "<I", 0),
    "NEEDED name past its table": lambda: _patch(
        BASE, struct.unpack_from("<Q", BASE, _section(2) + 24)[0], "<qQ", 1, 10**6
    ),
    "no dynamic section": lambda: _patch(BASE, _section(2) + 4, "<I", 1),
    "an executable": lambda: _patch(BASE, 16, "<H", 2),
    "another machine": lambda: _patch(BASE, 18, "<H", 183 if os.uname().machine != "aarch64" else 62),
}


def _venv(tmp_path: Path, files: Dict[str, bytes], record: List[str]) -> Path:
    venv = tmp_path / "venv"
    site = venv / SITE
    info = site / "hostile-1.0.dist-info"
    info.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\nversion = 3.11.7\n")
    (venv / "bin").mkdir()
    os.symlink(sys.executable, venv / "bin" / "python")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile\nVersion: 1.0\n")
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    (info / "RECORD").write_text("".join(f"{entry},,\n" for entry in record) + "hostile-1.0.dist-info/RECORD,,\n")
    return venv


def _one_finding(venv: Path) -> Tuple[str, str]:
    with no_hang():
        report = check_venv(read_venv(venv), TARGET)
    assert len(report.problems) == 1, [p.problem for p in report.problems]
    item = report.problems[0]
    assert item.distribution == "hostile"
    return item.problem.kind, item.problem.detail


def test_the_example_is_a_library_that_needs_nothing(tmp_path: Path) -> None:
    """So that each refusal below is its mutation's doing."""
    needs = read_needs(_write(tmp_path / "ok.so", BASE))
    assert needs.needed == () and needs.soname is None and needs.version_needs == {}
    with no_hang():
        report = check_venv(read_venv(_venv(tmp_path, {"hostile/ok.so": BASE}, ["hostile/ok.so"])), TARGET)
    assert report.problems == [] and report.checked == 1


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_library_is_one_finding(tmp_path: Path, case: str) -> None:
    kind, detail = _one_finding(_venv(tmp_path, {"hostile/_x.so": HOSTILE[case]()}, ["hostile/_x.so"]))
    assert kind == ("abi" if case == "another machine" else "damaged"), detail
    assert "\n" not in detail and len(detail) < 400


@pytest.mark.parametrize("seed", range(40))
def test_random_damage_never_raises_or_hangs(tmp_path: Path, seed: int) -> None:
    """Bytes flipped anywhere in the headers, the tables and the names: a finding or none, never a traceback."""
    rng = random.Random(seed)
    data = bytearray(BASE)
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    venv = _venv(tmp_path, {"hostile/_x.so": bytes(data)}, ["hostile/_x.so"])
    with no_hang():
        report = check_venv(read_venv(venv), TARGET)
    assert len(report.problems) <= 2


def test_special_files_in_a_library_s_place(tmp_path: Path) -> None:
    """A FIFO (opening it must not wait for a writer) and a directory, each named like a library."""
    venv = _venv(tmp_path, {}, ["hostile/pipe.so"])
    (venv / SITE / "hostile").mkdir()
    os.mkfifo(venv / SITE / "hostile" / "pipe.so")
    kind, detail = _one_finding(venv)
    assert kind == "damaged" and "not a regular file" in detail
    (venv / SITE / "hostile" / "pipe.so").unlink()
    (venv / SITE / "hostile" / "pipe.so").mkdir()
    assert _one_finding(venv)[0] == "damaged"


def test_links_out_of_the_venv_are_not_followed(tmp_path: Path) -> None:
    """A symbolic link, and a RECORD path with `..`, to a library outside: one finding each, the file unread."""
    outside = _write(tmp_path / "elsewhere.so", b"\x7fELF" + b"\0" * 10)  # damaged: reading it would say so
    venv = _venv(tmp_path, {}, ["hostile/link.so"])
    (venv / SITE / "hostile").mkdir()
    os.symlink(outside, venv / SITE / "hostile" / "link.so")
    kind, detail = _one_finding(venv)
    assert kind == "outside" and str(outside) in detail
    venv2 = _venv(tmp_path / "2", {}, ["../../../../elsewhere.so"])
    kind, detail = _one_finding(venv2)
    assert kind == "outside"


def test_a_link_out_of_the_venv_reads_as_one_sentence(tmp_path: Path) -> None:
    """audit's message says which RECORD entry leads where, as a sentence (not "is listed in the venv but: it")."""
    from ascend_setup.audit.native_rules import native_message

    outside = _write(tmp_path / "elsewhere.so", b"\x7fELF")
    venv = _venv(tmp_path, {}, ["hostile/link.so"])
    (venv / SITE / "hostile").mkdir()
    os.symlink(outside, venv / SITE / "hostile" / "link.so")
    report = check_venv(read_venv(venv), TARGET)
    assert native_message(report.problems[0], str(venv)) == (
        f"hostile 1.0: its RECORD lists {SITE}/hostile/link.so, but it leads out of the venv, to {outside}: not read"
    )


def test_a_reader_error_is_damaged_elf_not_a_traceback(tmp_path: Path) -> None:
    for case, make in HOSTILE.items():
        if case == "another machine":
            continue
        with pytest.raises(DamagedElf):
            read_needs(_write(tmp_path / "x.so", make()))


# -- ldconfig's cache ------------------------------------------------------------------------------------------


def _new_cache(entries: List[Tuple[str, str]]) -> bytes:
    """glibc-ld.so.cache1.1: header, entries, strings (offsets from the header's start)."""
    header, entry = 48, 24
    strings, offsets = b"", []
    base = header + entry * len(entries)
    for name, path in entries:
        key = base + len(strings)
        strings += name.encode() + b"\0"
        value = base + len(strings)
        strings += path.encode() + b"\0"
        offsets.append((key, value))
    head = NEW_MAGIC + struct.pack("<IIB3xI12x", len(entries), len(strings), 2, 0)
    return head + b"".join(struct.pack("<iIIIQ", 0x303, k, v, 0, 0) for k, v in offsets) + strings


def _compat_cache(entries: List[Tuple[str, str]]) -> bytes:
    """glibc 2.31's default: the old table first (its own 12-byte entries), then the new one, 8-byte aligned."""
    old = OLD_MAGIC + b"\0" + struct.pack("<I", len(entries)) + b"\0" * 12 * len(entries)
    return old.ljust((len(old) + 7) & ~7, b"\0") + _new_cache(entries)


ENTRIES = [
    ("libatb.so", "/opt/nnal/lib/libatb.so"),
    ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("libc.so.6", "/lib32/libc.so.6"),
]


@pytest.mark.parametrize("make", [_new_cache, _compat_cache], ids=["new", "compat"])
def test_both_cache_formats_are_read(make) -> None:
    assert parse_cache(make(ENTRIES)) == {
        "libatb.so": ["/opt/nnal/lib/libatb.so"],
        "libc.so.6": ["/lib/x86_64-linux-gnu/libc.so.6", "/lib32/libc.so.6"],
    }


CACHE_DAMAGE: Dict[str, Callable[[], bytes]] = {
    "empty": lambda: b"",
    "other magic": lambda: b"not a cache at all, but long enough to hold a header of forty-eight bytes",
    "truncated header": lambda: _new_cache(ENTRIES)[:30],
    "count past the end": lambda: _patch(_new_cache(ENTRIES), 20, "<I", 10**8),
    "name past the end": lambda: _patch(_new_cache(ENTRIES), 48 + 4, "<I", 10**8),
    "old table past the end": lambda: _patch(_compat_cache(ENTRIES), 12, "<I", 10**8),
    "old header truncated": lambda: OLD_MAGIC + b"\0",
}


@pytest.mark.parametrize("case", sorted(CACHE_DAMAGE))
def test_a_damaged_cache_is_no_cache(tmp_path: Path, case: str) -> None:
    path = _write(tmp_path / "ld.so.cache", CACHE_DAMAGE[case]())
    with no_hang():
        assert read_cache(path) == {}


def test_ld_so_conf_includes_end_in_a_loop(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    _write(tmp_path / "ld.so.conf", b"include conf.d/*.conf\n/opt/a # comment\n")
    _write(tmp_path / "conf.d" / "x.conf", f"/opt/b\ninclude {tmp_path}/ld.so.conf\n".encode())
    with no_hang():
        assert conf_dirs(tmp_path / "ld.so.conf") == ["/opt/b", "/opt/a"]
