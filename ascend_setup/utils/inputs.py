"""Every file the tool reads is checked here first: a regular file, of a sane size for its kind, text that
decodes, JSON or YAML that nests and counts within bounds. A FIFO would block a reader forever, /dev/zero
fills memory, a 100 000-deep list overflows the parser's stack and a 5000-digit number trips Python's int
limit: each is bad input (exit 2, one line naming the file), never a hang, an OOM or a traceback.

Kinds and their limits are written once, here; callers say which kind a file is.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Tuple, Type, TypeVar, Union

from pydantic import AfterValidator, BaseModel, StringConstraints, ValidationError
from typing_extensions import Annotated  # typing has it from 3.9 (there this is the same object)

from ascend_setup.errors import BadInput

KiB, MiB = 1024, 1024 * 1024
#: kind -> (what the user reads in a message, the largest size we read). A real matrix is ~20 KB, a lock
#: of ~200 packages ~150 KB, state.json a few KB; the limits leave room for 100x growth, not for /dev/zero.
KINDS: Dict[str, Tuple[str, Optional[int]]] = {
    "matrix": ("matrix file", 4 * MiB),
    "state": ("state file", 16 * MiB),
    "lock": ("lock file", 16 * MiB),
    "config": ("model config", 4 * MiB),
    "index": ("safetensors index", 64 * MiB),
    "hub-cache": ("cached hub listing and headers", 256 * MiB),  # a few 100 KB headers per shard, 100s of shards
    "safetensors": ("safetensors file", None),  # weights are huge; only the header is read (its own bound)
    "probe": ("probe result", 64 * KiB),
    "fleet": ("fleet result", 16 * MiB),
    "metadata": ("distribution metadata", 16 * MiB),
    "venv-record": ("venv record", 1 * MiB),
    "mirrors": ("mirror ranking", 4 * MiB),
    "python-builds": ("pinned CPython builds file", 1 * MiB),
    "speed": ("speed measurements file", 16 * MiB),
    "pip-config": ("pip/uv configuration", 1 * MiB),
    "pip-answer": ("remembered answer of pip's configuration", 1 * MiB),
    "inventory": ("node inventory", 4 * MiB),
    "codes": ("error-code catalogue", 1 * MiB),
    "server-record": ("server record", 1 * MiB),
    "serve-result": ("serve result", 1 * MiB),  # <workdir>/serve/<name>.json: serve's measurement, its card and TP
    "published": ("published bench figures", 1 * MiB),  # data/bench_published.yaml
    "bench-run": ("bench run", 4 * MiB),  # <workdir>/bench/*.json: this host's earlier sweeps
    # a host's (or a --root's) own small files: CANN's and the driver's version.info, ascend_install.info,
    # version.cfg (a few hundred bytes), os-release, passwd, group, /proc's cgroup and mountinfo (~100 KB in a
    # busy container), /proc/net/tcp (150 bytes a socket: 64 MiB is 400 000 sockets)
    "host-info": ("CANN or driver information file", 1 * MiB),
    "host-file": ("host file", 16 * MiB),
    "proc-net": ("socket table", 64 * MiB),
    "shell-rc": ("shell startup file", 4 * MiB),  # ~/.bashrc, where resume-on-login keeps its block
    "vllm-flags": ("vLLM serve flag table", 1 * MiB),
    "bundle-manifest": ("bundle manifest", 16 * MiB),  # ~250 bytes a file: room for 60 000 files
    "log": ("log", None),  # triage reads any size in one streaming pass
}
#: Deeper than any file we write (a lock nests 5 levels) and far below Python's recursion limit.
MAX_DEPTH = 64
#: Digits of one number: sizes and times need 20; Python refuses to parse ints past 4300.
MAX_DIGITS = 40

#: Bounded strings for the models of the files we read (no number or list passes as one): a name (an id, a
#: host, a package), a path or URL, and prose (a message, a captured stderr).
Name = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=256)]
PathText = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=4096)]
Prose = Annotated[str, StringConstraints(strict=True, max_length=64 * KiB)]


# -- names from a file that become paths ----------------------------------------------------------------------
# A build's archive, a lock's file, a bundle's entry, a tar member: each is joined to a folder of ours, so a
# name that climbs out (`../../victim`), starts at / or hides a NUL would write or read somewhere else.


def check_file_name(value: str) -> str:
    """`value` if it is one path component (a file's own name) that prints as itself (no control character
    reaches a terminal through a message naming it); else ValueError saying why (shown escaped)."""
    if value in ("", ".", "..") or "/" in value or not value.isprintable():
        raise ValueError(f"{ascii(value)[:120]} is not a single file name (no '/', '..', NUL or control character)")
    return value


def check_relative_path(value: str) -> str:
    """`value` if it is a relative path that stays below whatever root it is joined to (not absolute, no
    empty or '..' component, no NUL) and prints as itself; else ValueError saying why."""
    parts = value.split("/")
    if not value or value.startswith("/") or not value.isprintable() or any(p in ("", "..") for p in parts):
        raise ValueError(
            f"{ascii(value)[:120]} is not a relative path inside its folder (no leading '/', no '..', "
            "no empty part, no NUL or control character)"
        )
    return value


#: The model types of such names: a file's checked name, and a path relative to a root.
FileName = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=255), AfterValidator(check_file_name)]
RelativePath = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=4096), AfterValidator(check_relative_path)
]


def path_inside(root: Path, relative: str, what: str, *, hint: Optional[str] = None) -> Path:
    """`root / relative` once it is known to stay inside `root` after every symbolic link on the way is
    resolved (a `files` folder linked to /etc leads out); else BadInput naming `what` (the field)."""
    try:
        check_relative_path(relative)
    except ValueError as exc:
        raise BadInput(f"{what}: {exc}", hint=hint) from None
    base = root.resolve()
    target = (root / relative).resolve()
    if target != base and base not in target.parents:
        raise BadInput(f"{what}: {ascii(relative)[:120]} leads outside {root} through a symbolic link", hint=hint)
    return root / relative


def visible(text: object) -> str:
    """A file's text or name as a message may show it: a control character in it (ESC, BEL) is escaped, never
    sent to the terminal."""
    shown = str(text)
    return shown if shown.isprintable() else ascii(shown)


def _what(kind: str, path: Union[str, Path]) -> str:
    return f"{KINDS[kind][0]} {visible(path)}"


def open_input(
    path: Union[str, Path], kind: str, *, follow: bool = True, hint: Optional[str] = None, what: Optional[str] = None
) -> BinaryIO:
    """A binary handle on `path` once it is known to be a regular file within its kind's size. `follow=False`
    for the tool's own files in a workdir: a symbolic link there is someone else's, and refused. `what`
    replaces "<kind> <path>" in messages (say, to name the flag or variable the path came from)."""
    what = what or _what(kind, path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO with no writer must not hang
    except FileNotFoundError:
        raise BadInput(f"{what} does not exist", hint=hint) from None
    except IsADirectoryError:
        raise BadInput(f"{what} is a directory, not a file", hint=hint) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            text = (
                "is a symbolic link, which ascend-setup does not follow here"
                if not follow
                else "is a symbolic link loop"
            )
            raise BadInput(f"{what} {text}", hint=hint or f"remove the link {path}") from None
        raise BadInput(f"{what} cannot be read: {exc.strerror or exc}", hint=hint) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise BadInput(f"{what} is a directory, not a file", hint=hint)
        if not stat.S_ISREG(info.st_mode):
            kind_name = (
                "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else "a device"
            )
            raise BadInput(f"{what} is {kind_name}, not a regular file", hint=hint)
        limit = KINDS[kind][1]
        if limit is not None and info.st_size > limit:
            raise BadInput(
                f"{what} is {info.st_size} bytes, more than the {limit} a {KINDS[kind][0]} may have", hint=hint
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input_bytes(
    path: Union[str, Path], kind: str, *, follow: bool = True, hint: Optional[str] = None, what: Optional[str] = None
) -> bytes:
    """The whole file, checked (see open_input); a file that grows while read is cut at the limit + 1 byte,
    which the size check then refuses."""
    with open_input(path, kind, follow=follow, hint=hint, what=what) as handle:
        limit = KINDS[kind][1]
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise BadInput(f"{what or _what(kind, path)} grew past {limit} bytes while being read", hint=hint)
    return data


def read_host_text(path: Union[str, Path], kind: str) -> Optional[str]:
    """A host's own file (a CANN info file, /etc/passwd, /proc/1/cgroup), read through the gate: None when it
    is absent or this user may not read it (a fact: the file is not there for us), bad input when it is a
    FIFO, a device or past its kind's size (a link to /dev/zero must not fill memory, a FIFO must not hang).
    Bytes that are not UTF-8 are replaced: these files are ASCII, and one odd byte hides no fact."""
    if not os.path.lexists(path) or not os.access(path, os.R_OK):
        return None
    try:
        return read_input_bytes(path, kind).decode("utf-8", errors="replace")
    except BadInput:
        if not os.path.exists(path):  # a dangling link, or a file removed as we read: not there
            return None
        raise


def decode_text(data: bytes, source: str, *, hint: Optional[str] = None) -> str:
    """UTF-8 text, or bad input naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{source} is not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})", hint=hint) from None


def read_input_text(
    path: Union[str, Path], kind: str, *, follow: bool = True, hint: Optional[str] = None, what: Optional[str] = None
) -> str:
    return decode_text(
        read_input_bytes(path, kind, follow=follow, hint=hint, what=what), what or _what(kind, path), hint=hint
    )


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def check_json_depth(text: str, source: str, *, hint: Optional[str] = None) -> None:
    """Refuse nesting deeper than MAX_DEPTH before json.loads recurses into it."""
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise BadInput(f"{source} nests deeper than {MAX_DEPTH} levels", hint=hint)


def parse_json(text: Union[str, bytes], source: str, *, hint: Optional[str] = None) -> Any:
    """json.loads with bounds: depth, digits per number, no NaN/Infinity; every failure is one BadInput."""
    if isinstance(text, bytes):
        text = decode_text(text, source, hint=hint)
    check_json_depth(text, source, hint=hint)

    def number(kind: type) -> Any:
        def parse(token: str) -> Any:
            if len(token) > MAX_DIGITS:
                raise BadInput(f"{source} holds a {len(token)}-digit number (at most {MAX_DIGITS})", hint=hint)
            return kind(token)

        return parse

    def constant(token: str) -> Any:
        raise BadInput(f"{source} holds {token}, which is not a number JSON allows", hint=hint)

    try:
        return json.loads(text, parse_int=number(int), parse_float=number(float), parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{source} is corrupt: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", hint=hint
        ) from None
    except RecursionError:  # the depth check counts brackets; this is the belt to its braces
        raise BadInput(f"{source} nests too deeply", hint=hint) from None


def load_json(
    path: Union[str, Path], kind: str, *, follow: bool = True, hint: Optional[str] = None, what: Optional[str] = None
) -> Any:
    """A checked file's JSON (see open_input and parse_json)."""
    return parse_json(
        read_input_text(path, kind, follow=follow, hint=hint, what=what), what or _what(kind, path), hint=hint
    )


Model = TypeVar("Model", bound=BaseModel)


def _field(loc: Tuple[Union[int, str], ...]) -> str:
    """Where in a file a value is wrong, as `findings.0.id`; a key is the file's text, so a control character
    in it is shown escaped, never sent to the terminal."""
    parts = [visible(p) for p in loc]
    return ".".join(parts) or "the top level"


def validate(model: Type[Model], data: Any, source: str, *, hint: Optional[str] = None) -> Model:
    """`data` as `model` (whose fields carry the bounds), or one BadInput naming `source` and the first
    field that is wrong: a file's shape is checked once, where it is read, not by each use of a value."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(f"{source} is invalid at {_field(first['loc'])}: {first['msg']}", hint=hint) from None


def load_model(
    path: Union[str, Path],
    kind: str,
    model: Type[Model],
    *,
    follow: bool = True,
    hint: Optional[str] = None,
    what: Optional[str] = None,
) -> Model:
    """A checked file's JSON (see load_json) as `model` (see validate)."""
    return validate(
        model, load_json(path, kind, follow=follow, hint=hint, what=what), what or _what(kind, path), hint=hint
    )


#: YAML aliases can make a small file expand without bound in whoever walks it (the "billion laughs"): 30
#: levels of two aliases each are 60 aliases and 2^30 nodes. So both are bounded: the aliases, and the nodes
#: they add to what the text spells out (each alias counts as the size of what it names).
MAX_YAML_ALIASES = 1000
MAX_YAML_ALIAS_NODES = 100_000


def check_yaml_shape(text: str, source: str, *, hint: Optional[str] = None) -> None:
    """Walk the YAML event stream (which recurses nowhere) and refuse deep nesting, alias bombs and aliases
    that name a node inside itself (a cycle) before the composer, which recurses, builds a tree."""
    import yaml  # the YAML stack loads when a YAML input is read, not with every parser

    aliases = added = 0
    sizes: Dict[str, int] = {}  # anchor -> how many nodes the node it names holds, expanded
    open_frames: List[List[Any]] = []  # [anchor, size so far] of each collection being read
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def counted(size: int) -> None:
        if open_frames:
            open_frames[-1][1] += size

    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(open_frames) >= MAX_DEPTH:
                    raise BadInput(f"{source} nests deeper than {MAX_DEPTH} levels", hint=hint)
                open_frames.append([event.anchor, 1])
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                anchor, size = open_frames.pop()
                if anchor is not None:
                    sizes[anchor] = size
                counted(size)
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise BadInput(f"{source} uses more than {MAX_YAML_ALIASES} YAML aliases", hint=hint)
                if any(frame[0] == event.anchor for frame in open_frames):
                    raise BadInput(
                        f"{source}: the YAML alias *{_visible(event.anchor)} names a node that holds it (a cycle)",
                        hint=hint,
                    )
                size = sizes.get(event.anchor or "", 1)
                added += size
                if added > MAX_YAML_ALIAS_NODES:
                    raise BadInput(
                        f"{source}: its YAML aliases expand to more than {MAX_YAML_ALIAS_NODES} nodes (an alias bomb)",
                        hint=hint,
                    )
                counted(size)
            elif isinstance(event, yaml.ScalarEvent):
                if event.anchor is not None:
                    sizes[event.anchor] = 1
                counted(1)
                if (
                    event.tag is None
                    and event.implicit[0]
                    and len(event.value) > MAX_DIGITS
                    and event.value.lstrip("+-").isdigit()
                ):
                    raise BadInput(
                        f"{source} holds a {len(event.value)}-digit number (at most {MAX_DIGITS})", hint=hint
                    )
    except yaml.YAMLError as exc:
        if "nesting depth" in str(exc):  # libyaml's own bound (1000 levels), hit before any event
            raise BadInput(f"{source} nests deeper than {MAX_DEPTH} levels", hint=hint) from None
        return  # the real load reports syntax errors with their line


def _visible(text: Optional[str]) -> str:
    """A name from a file as a message may show it: control characters escaped."""
    return "" if text is None else text if text.isprintable() else ascii(text)[1:-1]
