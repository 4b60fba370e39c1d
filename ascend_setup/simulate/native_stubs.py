"""Real shared objects for the simulated world, compiled at run time with the machine's C compiler.

- `plain_library`: needs nothing (the custom-op libraries every stub vllm-ascend ships), written byte by byte;
- `nnal_libatb(cann)`: NNAL's libatb.so, exporting `atb_runtime_<major>_<minor>` of its CANN release only;
- `plugin_extension(cann)`: vllm_ascend_C, whose NEEDED libatb.so only CANN's environment resolves and which
  calls the `atb_runtime_*` of its own CANN release (NNAL of another release lacks it: an undefined symbol);
- `post_231_library()`: calls close_range, versioned GLIBC_2.34, newer than Ubuntu 20.04's glibc 2.31;
- `stand_in_glibc_library(version)`: the same call at any GLIBC_x.y, newer than any machine's if need be.

Each compiled one is built once per process (a few tens of milliseconds). Without a C compiler the simulated
world has no native needs: those are None, and the tests and the demo that need them say so and skip.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence, Tuple

from ascend_setup.host.machine import glibc_version

#: close_range is GLIBC_2.34 (objdump -T libc.so.6); declared here, since a glibc 2.31 root's headers lack it.
POST_231_SOURCE = (
    "int close_range(unsigned int, unsigned int, int);\nint stub_close_all(void) { return close_range(3, ~0U, 0); }\n"
)
#: A stand-in C library that defines close_range at GLIBC_2.34, for a machine whose glibc is older: what a
#: library built on a newer machine links against, read by the linker alone (never loaded).
FUTURE_LIBC_SOURCE = "int close_range(unsigned int a, unsigned int b, int c) { return 0; }\n"


def runtime_symbol(cann: str) -> str:
    """The symbol NNAL's libatb.so of `cann` exports and a plugin built for that CANN calls."""
    numbers = (re.findall(r"\d+", cann) + ["0", "0"])[:2]
    return "atb_runtime_" + "_".join(numbers)


def compiler() -> Optional[str]:
    return shutil.which("cc") or shutil.which("gcc")


def _compile(source: str, name: str, args: Sequence[str] = (), extra: Sequence[Tuple[str, str]] = ()) -> bytes:
    """The shared object `source` compiles to (`extra`: (file name, text) written beside it first)."""
    cc = compiler()
    if cc is None:
        raise FileNotFoundError("no C compiler")
    with tempfile.TemporaryDirectory(prefix="ascend-setup-cc-") as tmp:
        for file, text in extra:
            Path(tmp, file).write_text(text)
        Path(tmp, "src.c").write_text(source)
        out = Path(tmp, name)
        subprocess.run(
            [cc, "-shared", "-fPIC", "-O0", "-o", str(out), "src.c", *args],
            cwd=tmp,
            check=True,
            capture_output=True,
            timeout=120,
        )
        return out.read_bytes()


def plain_library() -> bytes:
    """A shared object that needs nothing (`minimal_library`): the stubs' kernels, and an extension with no needs."""
    return minimal_library()


@lru_cache(maxsize=None)
def nnal_libatb(cann: str) -> Optional[bytes]:
    if not compiler():
        return None
    source = f"int {runtime_symbol(cann)}(void) {{ return 1; }}\nconst char *atb_version(void) {{ return {cann!r}; }}\n"
    return _compile(source.replace("'", '"'), "libatb.so", ["-Wl,-soname,libatb.so"])


@lru_cache(maxsize=None)
def plugin_extension(cann: str) -> Optional[bytes]:
    """vllm_ascend_C for `cann`: NEEDED libatb.so (linked against this CANN's stub NNAL), calls its runtime."""
    libatb = nnal_libatb(cann)
    if libatb is None:
        return None
    symbol = runtime_symbol(cann)
    with tempfile.TemporaryDirectory(prefix="ascend-setup-atb-") as tmp:
        Path(tmp, "libatb.so").write_bytes(libatb)
        source = f"int {symbol}(void);\nint vllm_ascend_ops_ready(void) {{ return {symbol}(); }}\n"
        return _compile(source, "vllm_ascend_C.so", [f"-L{tmp}", "-latb"])


@lru_cache(maxsize=None)
def post_231_library() -> Optional[bytes]:
    """A library whose close_range needs GLIBC_2.34: linked against this machine's glibc when it has 2.34, else
    (a glibc 2.31 root) against a stand-in that defines it, as if built on a newer machine."""
    if not compiler():
        return None
    glibc = tuple(int(p) for p in (glibc_version() or "0.0").split(".")[:2])
    return _compile(POST_231_SOURCE, "libpost231.so") if glibc >= (2, 34) else stand_in_glibc_library("2.34")


@lru_cache(maxsize=None)
def stand_in_glibc_library(version: str, symbol: str = "close_range") -> Optional[bytes]:
    """A library whose `symbol` needs GLIBC_<version>, whatever this machine's glibc: linked against a stand-in
    libc.so.6 that defines it at that version (read by the linker alone, never loaded). A symbol no real glibc
    has is what glibc 2.31 is to close_range: absent from the C library the loader would find."""
    if not compiler():
        return None
    with tempfile.TemporaryDirectory(prefix="ascend-setup-libc-") as tmp:
        script = f"GLIBC_{version} {{ global: {symbol}; local: *; }};\n"
        rename = [] if symbol == "close_range" else [f"-Dclose_range={symbol}"]
        Path(tmp, "libc.so.6").write_bytes(
            _compile(
                FUTURE_LIBC_SOURCE,
                "libc.so.6",
                [*rename, "-nostdlib", "-Wl,-soname,libc.so.6", "-Wl,--version-script,libc.map"],
                [("libc.map", script)],
            )
        )
        os.symlink("libc.so.6", Path(tmp, "libc.so"))
        return _compile(POST_231_SOURCE, "libpost231.so", [*rename, "-nostdlib", f"-L{tmp}", "-lc"])


def minimal_library() -> bytes:
    """The smallest shared object the readers accept: ELF64 little-endian, ET_DYN, for this kind of machine,
    one PT_DYNAMIC program header, a .dynamic of one DT_NULL, an empty .dynstr and the section names (no PT_LOAD:
    it is read, never loaded). The stub custom-op libraries are this: they need nothing, and no compiler."""
    names = b"\0.dynstr\0.dynamic\0.shstrtab\0"
    dynstr, dynamic = b"\0", struct.pack("<qQ", 0, 0)
    header_size, program_size, section_size = 64, 56, 64
    dynstr_at = header_size + program_size
    dynamic_at = dynstr_at + 8
    names_at = dynamic_at + len(dynamic)
    table_at = (names_at + len(names) + 7) & ~7
    machine = {"x86_64": 62, "aarch64": 183}.get(os.uname().machine, 62)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, machine, 1, 0, header_size, table_at, 0, header_size, program_size, 1, section_size, 4, 3
    )
    program = struct.pack("<IIQQQQQQ", 2, 4, dynamic_at, dynamic_at, dynamic_at, len(dynamic), len(dynamic), 8)

    def section(name: int, kind: int, offset: int, size: int, link: int = 0, entsize: int = 0) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, kind, 0, offset, offset, size, link, 0, 1, entsize)

    body = (dynstr.ljust(8, b"\0") + dynamic + names).ljust(table_at - dynstr_at, b"\0")
    table = (
        bytes(section_size)
        + section(1, 3, dynstr_at, len(dynstr))
        + section(9, 6, dynamic_at, len(dynamic), link=1, entsize=16)
        + section(18, 3, names_at, len(names))
    )
    return header + program + body + table
