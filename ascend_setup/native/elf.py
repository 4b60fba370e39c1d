"""What one shared object asks of the dynamic loader, read from its ELF headers and dynamic sections only.

The ELF header, the section table, the dynamic tags, the version sections and the dynamic symbol table are
unpacked with `struct`, as the System V ABI and glibc's <elf.h> lay them out. pyelftools does the same, but
builds a parser per file and an object per field: 12 ms a library on this machine (3 s for the 246 libraries
of a 63-distribution venv), where a 180-distribution vLLM venv holds ~800 and the check must take seconds; these
few dozen lines take ~0.3 ms a library, and tests hold them to `readelf -d`, `objdump -T` and `ldd`. Every
count and offset a file states is checked against the bytes it really has before it is used: a damaged or
hostile file (truncated, a length past its end, a count that would loop for ever) is `DamagedElf`, never a
traceback or a hang, and no file is read whole.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Dict, FrozenSet, Iterator, List, Optional, Tuple

ELF_MAGIC = b"\x7fELF"
#: A dynamic section past this size is no real one (torch_npu's largest .dynstr is ~30 MB).
MAX_SECTION = 256 * 1024 * 1024
#: More sections than this is no real shared object (a torch library has ~40).
MAX_SECTIONS = 65536
_VER_FLG_BASE = 0x1
_SHN_UNDEF = 0
_STB_WEAK = 2
#: ELF symbol bindings whose definitions the loader offers to other objects: GLOBAL, WEAK, GNU_UNIQUE.
_EXPORTED = (1, 2, 10)
_ET_DYN = 3
SHT_NOBITS, SHT_DYNAMIC, SHT_DYNSYM = 8, 6, 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
DT_NULL, DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 14, 15, 29
#: e_machine values by the names the loader's error messages and `file` use.
MACHINES = {3: "i386", 40: "arm", 62: "x86_64", 183: "aarch64", 21: "ppc64", 22: "s390x", 243: "riscv"}


class DamagedElf(Exception):
    """A file that is not a loadable ELF shared object; the message says why, in the loader's terms."""


@dataclass(frozen=True)
class ElfNeeds:
    """One shared object's requests (NEEDED, its search paths, symbol versions, undefined symbols) and what it
    offers (its SONAME, version definitions and exported dynamic symbols)."""

    path: Path
    elf_class: int  # 32 or 64
    machine: str  # e_machine by name: 'x86_64', 'aarch64' (MACHINES)
    soname: Optional[str]
    needed: Tuple[str, ...]
    rpath: Tuple[str, ...]
    runpath: Tuple[str, ...]
    version_needs: Dict[str, Tuple[str, ...]]  # needed file -> the versions asked of it (GLIBC_2.34, ...)
    version_defs: FrozenSet[str]  # the versions this object defines (not its base name)
    undefined: Tuple[str, ...]  # strong undefined symbols: the loader must find each one somewhere
    exported: FrozenSet[str]  # defined global/weak symbols other objects may bind to

    @property
    def abi(self) -> Tuple[int, str]:
        """What the loader compares before it takes a candidate file: class and machine."""
        return self.elf_class, self.machine


def _open_regular(path: Path) -> BinaryIO:
    """The file for reading, refused unless it is a regular file (a FIFO in a library's place would hang)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise DamagedElf(f"cannot open it: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DamagedElf("not a regular file")
    return os.fdopen(fd, "rb")


@dataclass(frozen=True)
class _Section:
    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


class _Elf:
    """The ELF header and section table of an open file, bounds-checked; sections are read on demand."""

    def __init__(self, handle: IO[bytes], size: int) -> None:
        self.handle, self.size = handle, size
        self._strings: Dict[int, _Strings] = {}
        ident = self._read(0, 16, "the ELF identification")
        if ident[4] not in (1, 2):
            raise DamagedElf(f"unknown ELF class {ident[4]}")
        if ident[5] not in (1, 2):
            raise DamagedElf(f"unknown ELF data encoding {ident[5]}")
        self.elf_class = 64 if ident[4] == 2 else 32
        self.order = "<" if ident[5] == 1 else ">"
        wide = self.elf_class == 64
        header = struct.Struct(self.order + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"))
        (
            self.e_type,
            self.e_machine,
            _version,
            _entry,
            _phoff,
            shoff,
            _flags,
            _ehsize,
            _phentsize,
            _phnum,
            shentsize,
            shnum,
            _shstrndx,
        ) = header.unpack(self._read(16, header.size, "the ELF header"))
        shape = struct.Struct(self.order + ("IIQQQQIIQQ" if wide else "IIIIIIIIII"))
        if shoff == 0:
            raise DamagedElf("it has no section headers")
        if shentsize < shape.size:
            raise DamagedElf(f"its section headers are {shentsize} bytes each, less than the {shape.size} of one")
        if shnum == 0:  # extended numbering: the count is section 0's sh_size
            shnum = shape.unpack(self._read(shoff, shape.size, "section header 0"))[5]
        if shnum > MAX_SECTIONS or shoff + shnum * shentsize > size:
            raise DamagedElf(
                f"its section headers ({shnum} at offset {shoff}) lie past the end of the file ({size} bytes)"
            )
        table = self._read(shoff, shnum * shentsize, "the section headers")
        self.sections = []
        for n in range(shnum):
            fields = shape.unpack_from(table, n * shentsize)
            # name, type, flags, addr, offset, size, link, info, addralign, entsize
            self.sections.append(_Section(fields[1], fields[4], fields[5], fields[6], fields[7], fields[9]))

    def _read(self, offset: int, length: int, what: str) -> bytes:
        if offset + length > self.size:
            raise DamagedElf(
                f"{what} ({length} bytes at offset {offset}) lies past the end of the file ({self.size} bytes)"
            )
        self.handle.seek(offset)
        data = self.handle.read(length)
        if len(data) != length:
            raise DamagedElf(f"{what} could not be read whole")
        return data

    def data(self, section: _Section, what: str) -> bytes:
        """A section's bytes, after checking that its offset and size lie inside the file."""
        if section.type == SHT_NOBITS:
            return b""
        if section.size > MAX_SECTION:
            raise DamagedElf(f"{what} says {section.size} bytes, more than any real one")
        return self._read(section.offset, section.size, what)

    def strings_of(self, section: _Section, what: str) -> _Strings:
        """The string table `section` links to, read once (.dynamic, .dynsym and the versions share .dynstr)."""
        if not 0 < section.link < len(self.sections):
            raise DamagedElf(f"{what} links to string table {section.link}, which does not exist")
        if section.link not in self._strings:
            self._strings[section.link] = _Strings(
                self.data(self.sections[section.link], f"the string table of {what}")
            )
        return self._strings[section.link]

    def of_type(self, kind: int) -> Optional[_Section]:
        return next((s for s in self.sections if s.type == kind), None)


class _Strings:
    """A string table, split once: each name that starts right after a NUL is a dict lookup (a torch library asks
    for 10^5 of them); one that starts inside another (the linker merges common tails) is cut out. Decoded as
    Latin-1, one character a byte, so offsets stay byte offsets."""

    def __init__(self, data: bytes) -> None:
        self.text = data.decode("latin-1")
        self.starts: Dict[int, str] = {}
        position = 0
        for part in self.text.split("\0")[:-1]:  # the last piece ends at no NUL: not a name
            self.starts[position] = part
            position += len(part) + 1

    def __getitem__(self, offset: int) -> str:
        found = self.starts.get(offset)
        if found is not None:
            return found
        end = self.text.find("\0", offset)
        if not 0 <= offset < len(self.text) or end < 0:
            raise DamagedElf(f"a name at offset {offset} lies outside its string table ({len(self.text)} bytes)")
        return self.text[offset:end]


@dataclass(frozen=True)
class _Layout:
    """An entry of .gnu.version_r/_d (or a symbol): its struct, and which fields hold the auxiliary count, the
    auxiliary offset and the next entry's offset (an auxiliary entry has only `next`)."""

    shape: struct.Struct
    next: int = -1
    count: int = -1
    aux: int = -1


def _version_entries(
    data: bytes, count: int, head: _Layout, aux: _Layout, where: str
) -> Iterator[Tuple[Tuple[int, ...], List[Tuple[int, ...]]]]:
    """The entries of .gnu.version_r/_d as (entry, [aux entries]); every offset is bounded by the section,
    and the entries at most as many as fit in it (so a `next` of 0 cannot loop)."""
    if count > len(data) // head.shape.size:
        raise DamagedElf(f"{where} says {count} entries, more than its {len(data)} bytes hold")
    offset = 0
    for _ in range(count):
        if offset + head.shape.size > len(data):
            raise DamagedElf(f"{where}: an entry at offset {offset} runs past the section's end")
        entry = head.shape.unpack_from(data, offset)
        if entry[head.count] > len(data) // aux.shape.size:
            raise DamagedElf(
                f"{where}: an entry says {entry[head.count]} auxiliary entries, more than the section holds"
            )
        auxes, at = [], offset + entry[head.aux]
        for _ in range(entry[head.count]):
            if at + aux.shape.size > len(data):
                raise DamagedElf(f"{where}: an auxiliary entry at offset {at} runs past the section's end")
            item = aux.shape.unpack_from(data, at)
            auxes.append(item)
            at += item[aux.next]
        yield entry, auxes
        offset += entry[head.next]


def _layouts(elf: _Elf) -> Dict[str, _Layout]:
    order = elf.order
    return {
        # Elf_Verneed: vn_version, vn_cnt, vn_file, vn_aux, vn_next
        "verneed": _Layout(struct.Struct(order + "HHIII"), next=4, count=1, aux=3),
        # Elf_Vernaux: vna_hash, vna_flags, vna_other, vna_name, vna_next
        "vernaux": _Layout(struct.Struct(order + "IHHII"), next=4),
        # Elf_Verdef: vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
        "verdef": _Layout(struct.Struct(order + "HHHHIII"), next=6, count=3, aux=5),
        # Elf_Verdaux: vda_name, vda_next
        "verdaux": _Layout(struct.Struct(order + "II"), next=1),
    }


def _version_needs(elf: _Elf, section: _Section, layouts: Dict[str, _Layout]) -> Dict[str, Tuple[str, ...]]:
    data, names = elf.data(section, ".gnu.version_r"), elf.strings_of(section, ".gnu.version_r")
    return {
        names[entry[2]]: tuple(names[a[3]] for a in auxes)
        for entry, auxes in _version_entries(
            data, section.info, layouts["verneed"], layouts["vernaux"], ".gnu.version_r"
        )
    }


def _version_defs(elf: _Elf, section: _Section, layouts: Dict[str, _Layout]) -> FrozenSet[str]:
    """The versions an object defines; the entry flagged BASE is its own name, not a version."""
    data, names = elf.data(section, ".gnu.version_d"), elf.strings_of(section, ".gnu.version_d")
    return frozenset(
        names[auxes[0][0]]
        for entry, auxes in _version_entries(
            data, section.info, layouts["verdef"], layouts["verdaux"], ".gnu.version_d"
        )
        if auxes and not entry[1] & _VER_FLG_BASE
    )


def _symbols(elf: _Elf, section: _Section) -> Tuple[Tuple[str, ...], FrozenSet[str]]:
    """(strong undefined names, exported names) of .dynsym, unpacked in one pass over its bytes."""
    data, names = elf.data(section, ".dynsym"), elf.strings_of(section, ".dynsym")
    wide = elf.elf_class == 64
    # Elf64_Sym: name, info, other, shndx, value, size; Elf32_Sym: name, value, size, info, other, shndx
    sym = struct.Struct(elf.order + ("IBBHQQ" if wide else "IIIBBH"))
    name_at, info_at, shndx_at = (0, 1, 3) if wide else (0, 3, 5)
    undefined: List[str] = []
    exported = set()
    for fields in sym.iter_unpack(data[: len(data) - len(data) % sym.size]):
        if not fields[name_at]:
            continue
        bind = fields[info_at] >> 4
        if fields[shndx_at] == _SHN_UNDEF:
            if bind != _STB_WEAK:
                undefined.append(names[fields[name_at]])
        elif bind in _EXPORTED:
            exported.add(names[fields[name_at]])
    return tuple(undefined), frozenset(exported)


def _dynamic(elf: _Elf) -> Tuple[Optional[str], List[str], List[str], List[str]]:
    """(SONAME, NEEDED, RPATH, RUNPATH) from the dynamic section's tags, up to DT_NULL or its end."""
    section = elf.of_type(SHT_DYNAMIC)
    if section is None:
        raise DamagedElf("it has no dynamic section: the loader cannot load it as a shared library")
    data, names = elf.data(section, ".dynamic"), elf.strings_of(section, ".dynamic")
    entry = struct.Struct(elf.order + ("qQ" if elf.elf_class == 64 else "iI"))
    soname, needed, rpath, runpath = None, [], [], []
    for tag, value in entry.iter_unpack(data[: len(data) - len(data) % entry.size]):
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed.append(names[value])
        elif tag == DT_SONAME:
            soname = names[value]
        elif tag == DT_RPATH:
            rpath += [p for p in names[value].split(":") if p]
        elif tag == DT_RUNPATH:
            runpath += [p for p in names[value].split(":") if p]
    return soname, needed, rpath, runpath


def read_needs(path: Path) -> ElfNeeds:
    """The shared object at `path`, as the loader sees it; DamagedElf when it is none (the message says why)."""
    with _open_regular(path) as handle:
        return read_stream(handle, os.fstat(handle.fileno()).st_size, path)


def read_stream(handle: IO[bytes], size: int, path: Path) -> ElfNeeds:
    """The shared object `handle` reads (seekable, `size` bytes: a file, or a wheel's member as zipfile opens
    it, decompressed as far as the section table and no further kept); `path` names it."""
    if size < 4 or handle.read(4) != ELF_MAGIC:
        raise DamagedElf("invalid ELF header (not an ELF file)" if size >= 4 else f"file too short ({size} bytes)")
    try:
        return _read(path, _Elf(handle, size))
    except (struct.error, UnicodeDecodeError, OverflowError) as exc:
        raise DamagedElf(f"damaged ELF: {exc}") from None


def _read(path: Path, elf: _Elf) -> ElfNeeds:
    if elf.e_type != _ET_DYN:
        raise DamagedElf(f"its type is {elf.e_type}, not a shared object (ET_DYN, 3)")
    soname, needed, rpath, runpath = _dynamic(elf)
    layouts = _layouts(elf)
    needs: Dict[str, Tuple[str, ...]] = {}
    defs: FrozenSet[str] = frozenset()
    undefined: Tuple[str, ...] = ()
    exported: FrozenSet[str] = frozenset()
    for section in elf.sections:
        if section.type == SHT_GNU_VERNEED:
            needs = _version_needs(elf, section, layouts)
        elif section.type == SHT_GNU_VERDEF:
            defs = _version_defs(elf, section, layouts)
        elif section.type == SHT_DYNSYM:
            undefined, exported = _symbols(elf, section)
    return ElfNeeds(
        path=path,
        elf_class=elf.elf_class,
        machine=MACHINES.get(elf.e_machine, f"machine {elf.e_machine}"),
        soname=soname,
        needed=tuple(needed),
        rpath=tuple(rpath),
        runpath=tuple(runpath),
        version_needs=needs,
        version_defs=defs,
        undefined=undefined,
        exported=exported,
    )
