"""The system's library directories as the loader knows them: ldconfig's cache, read as a file.

The format is glibc's (`sysdeps/generic/dl-cache.h`, written by `elf/cache.c`): since glibc 2.32 the file is the
new format alone, `glibc-ld.so.cache1.1`, a header (nlibs, len_strings, flags, extension offset) then `nlibs`
entries of 24 bytes (flags, key, value, osversion, hwcap), key and value being offsets of the library's name
and path from the start of that header. Before 2.32 (Debian 11, Ubuntu 20.04: glibc 2.31) ldconfig wrote the
"compat" form: the old `ld.so-1.7.0` table first (12-byte entries), then the new one at the next 8-byte
boundary. Without a readable cache, /etc/ld.so.conf (its `include` globs) and the default directories stand in.
The entries' flags (which ABI each library is for) are not read: the resolver reads each candidate's own ELF
header instead, as the loader checks it too.
"""

from __future__ import annotations

import glob
import os
import stat
import struct
from pathlib import Path
from typing import Dict, FrozenSet, List

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
_NEW_HEADER = struct.Struct("<20sIIB3xI12x")  # magic+version, nlibs, len_strings, flags, extension offset
_NEW_ENTRY = struct.Struct("<iIIIQ")
_OLD_ENTRY_SIZE = 12
#: No real cache is near this (Debian with every library package: ~2 MB).
MAX_CACHE = 64 * 1024 * 1024
#: What the loader searches after the cache, by the ELF class (glibc's SYSTEM_DIRS).
DEFAULT_DIRS = {64: ("/lib64", "/usr/lib64", "/lib", "/usr/lib"), 32: ("/lib", "/usr/lib")}


def _string(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if not 0 <= offset < len(data) or end < 0:
        raise ValueError(f"a name at offset {offset} lies outside the cache")
    return data[offset:end].decode("utf-8", "replace")


def parse_cache(data: bytes) -> Dict[str, List[str]]:
    """{library name: [paths, in the cache's order]}; ValueError for a file in neither format."""
    start = 0
    if data.startswith(OLD_MAGIC):
        if len(data) < 16:
            raise ValueError("the cache ends inside its header")
        (nlibs,) = struct.unpack_from("<I", data, 12)
        start = (16 + nlibs * _OLD_ENTRY_SIZE + 7) & ~7
    if not data.startswith(NEW_MAGIC, start):
        raise ValueError("not an ld.so.cache in glibc's new format (glibc-ld.so.cache1.1)")
    if start + _NEW_HEADER.size > len(data):
        raise ValueError("the cache ends inside its header")
    _magic, nlibs, _strings, _flags, _extension = _NEW_HEADER.unpack_from(data, start)
    table = data[start:]
    if _NEW_HEADER.size + nlibs * _NEW_ENTRY.size > len(table):
        raise ValueError(f"the cache says {nlibs} libraries, more than its {len(data)} bytes hold")
    found: Dict[str, List[str]] = {}
    for n in range(nlibs):
        _entry_flags, key, value, _os, _hwcap = _NEW_ENTRY.unpack_from(table, _NEW_HEADER.size + n * _NEW_ENTRY.size)
        found.setdefault(_string(table, key), []).append(_string(table, value))
    return found


def read_cache(path: Path = Path("/etc/ld.so.cache")) -> Dict[str, List[str]]:
    """The cache at `path`; empty when there is none or it cannot be read (the directories then stand in)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE:
            return {}
        data = handle.read(MAX_CACHE)
    try:
        return parse_cache(data)
    except (ValueError, struct.error):
        return {}


def conf_dirs(path: Path = Path("/etc/ld.so.conf"), seen: FrozenSet[str] = frozenset()) -> List[str]:
    """The directories /etc/ld.so.conf names, `include` globs followed (each file once: an include loop ends)."""
    if str(path) in seen or not path.is_file():
        return []
    seen = seen | {str(path)}
    dirs: List[str] = []
    try:
        lines = path.read_text(errors="replace").splitlines()[:10000]
    except OSError:
        return []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include "):
            pattern = line.split(None, 1)[1]
            if not os.path.isabs(pattern):
                pattern = str(path.parent / pattern)
            for included in sorted(glob.glob(pattern))[:1000]:
                dirs += conf_dirs(Path(included), seen)
        elif line.startswith("/"):
            dirs.append(line.split("=", 1)[0])
    return dirs
