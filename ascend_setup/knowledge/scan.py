"""Triage: the root cause of a log, read in one streaming pass.

Why it ranks lines the way it does (the one place this is decided):
- A cause is named only by an *error-shaped* line: a Python exception line (a traceback's last line), a
  `CMake Error` and the indented message under it, an `error:`/`Error:`/`ERROR:` line, a shell's "not set" or
  "No such file", a loader or linker error, the compiler's `Killed signal terminated program`. A build prints
  file names by the thousand (`copying .../split_qkv_rmsnorm_rope_simt.py`, `-- Installing: .../error_code.h`,
  `Compiling ...`); a line of that kind never names a cause, whatever word it contains.
- The earliest line of the *last attempt* that a known signature names wins. A step log holds every attempt
  (`=== step: reason ===`); only the last one failed the way the user now sees.
- Summaries ('Failed building wheel', 'Engine core initialization failed', pip's
  'subprocess-exited-with-error', ninja's 'FAILED:') come after the cause and never name it: they are shown
  only when the log holds nothing else. A resolver's conflict block ranks below a specific cause inside it,
  an unknown error line below both, a warning below any error.

The pass looks at whole blocks with `bytes.find` for a few markers every error-shaped line carries, and decodes
only the lines around them: a 1 GB log is read in seconds, in constant memory (benchmarks/triage.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, List, Optional, Sequence, Tuple

from ascend_setup.errors import BadInput
from ascend_setup.knowledge.fixes import Host, device_of
from ascend_setup.knowledge.signatures import RESOLVER_BLOCKS, SIGNATURES, Signature

#: Every error-shaped line contains one of these (see ERROR_SHAPE), or follows a line that opens a window.
#: Each marker costs a full pass of bytes.find (about 3 s/GB on a loaded 2-core host), so they are few: " not "
#: covers "is not set" and the loader's "version `GLIBC_2.34' not found"; uv's "error: No solution found" has "rror".
MARKERS = (b"rror", b"RROR", b" not ", b"No such file", b"Traceback", b"EI0006")
ATTEMPT_MARKER = b"\n=== "
ATTEMPT = re.compile(r"^=== [\w.:-]+: .* ===$")

ERROR_SHAPE = re.compile(
    r"(?:^|[\s(\[:>|'\x22])(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::|\(|$)"  # exception lines
    r"|(?:^|\W)(?:[A-Za-z_]\w*\.)+[A-Z][A-Za-z]+: "  # qualified exceptions: packaging.version.InvalidVersion: ...
    r"|CMake Error|\b(?:error|Error|ERROR)\b|\bfatal\b"
    r"|: .*\bnot set\b|No such file or directory|No solution found|EI\d{4}|GLIBC_[\d.]+' not found"
    r"|undefined symbol: |cannot open shared object file|undefined reference to")  # the loader's and linker's
#: Lines that name files or packages, and a traceback's `raise` source lines: they never name a cause.
NAME_LINE = re.compile(r"^\s*(?:raise |copying |Compiling |byte-compiling |creating |adding '|removing |writing |"
                       r"Copy: |"
                       r"-- (?:Installing|Up-to-date|Set runtime path):|\[\s*\d+/\d+\] (?!FAILED)|\[\s*\d+%\] |"
                       r"Building (?:CXX|C|ASM) object|Linking |Scanning dependencies|Collecting |Downloading |"
                       r"Using cached |Requirement already satisfied|Processing |Successfully (?:installed|built) |"
                       r"Installing collected|Attempting uninstall|Found existing installation|Uninstalling )")
#: Lines that summarise a failure without naming its cause.
NOISE = re.compile(r"Engine core initialization failed|^\s*FAILED: |ninja: build stopped|subprocess-exited-with-error|"
                   r"This error originates from a subprocess|Failed building wheel|Failed to build|"
                   r"CalledProcessError|returned non-zero exit status|Could not build wheels|"
                   r"metadata-generation-failed|Encountered error while|did not run successfully|"
                   r"Configuring incomplete, errors occurred|EngineDeadError|See (?:root cause|stack trace) above|"
                   r"^\s*error: (?:subprocess|metadata)|make(?:\[\d+\])?: \*\*\* |Error running build_aclnn|"
                   r"^\s*(?:\(\w+ pid=\d+\) )*(?:ERROR \S+ \S+ \[[^\]]*\] )?Traceback \(most recent call last\)")
#: The resolver's block ends here.
BLOCK_END = re.compile(r"^To fix this you could try|^\s*hint:|^ERROR: ResolutionImpossible")
#: A CMake error's message is the indented text under its header; a traceback's cause is its last line.
CMAKE_ERROR = re.compile(r"CMake Error")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
SOC = re.compile(r"ascend910b\d\w*|ascend910_93\d\d|ascend310p\d\w*|ascend950\w*", re.I)
WINDOW = {"cmake": 8, "traceback": 400}

RANK_KNOWN, RANK_BLOCK, RANK_ERROR, RANK_WARNING, RANK_SUMMARY = range(5)
CONTEXT = 3
BLOCK_LINES = 20
CHUNK = 8 << 20
MAX_LINE = 16 << 20  # a longer line is scanned in pieces: memory stays bounded


@dataclass
class Diagnosis:
    """One log's root cause: `id` None when no signature knows it (the line is then the most error-like one)."""

    id: Optional[str]
    cause: str
    fix: Optional[str]
    line_number: int
    line: str
    context: List[str] = field(default_factory=list)

    def render(self) -> str:
        around = "\n".join(f"    {line}" for line in self.context)
        fix = f"\n  fix: {self.fix}" if self.fix else ""
        return f"root cause (log line {self.line_number}): {self.cause}{fix}\n{around}"

    def to_json(self) -> dict:
        return {"id": self.id, "line_number": self.line_number, "line": self.line, "cause": self.cause,
                "fix": self.fix, "context": self.context}


@dataclass
class _Found:
    rank: int
    line_number: int
    line: str
    signature: Optional[Signature]
    groups: Tuple[str, ...]
    context: List[str]
    after: int  # lines of context still to collect
    block: bool  # a resolver block: collect until BLOCK_END


def _is_warning(line: str) -> bool:
    return line.lstrip().upper().startswith(("WARNING", "WARN:", "DEPRECATION"))


def _match(line: str) -> Tuple[int, Optional[Signature], Tuple[str, ...]]:
    for rank, table in ((RANK_KNOWN, SIGNATURES), (RANK_BLOCK, RESOLVER_BLOCKS)):
        for sig in table:
            m = sig.pattern.search(line)
            if m:
                return rank, sig, tuple(g or "" for g in m.groups()) or ("",)
    if NOISE.search(line):
        return RANK_SUMMARY, None, ()
    return (RANK_WARNING if _is_warning(line) else RANK_ERROR), None, ()


class Scanner:
    """Feed it blocks of bytes that end at a line break; ask `result()` at the end."""

    def __init__(self) -> None:
        self.best: Optional[_Found] = None
        self.line_base = 0  # lines before the current block
        self.before: List[str] = []  # the previous block's last lines, for context
        self.window: Optional[str] = None
        self.window_left = 0
        self.soc: Optional[str] = None

    # -- one line ------------------------------------------------------------------------------------------------
    def _line(self, number: int, raw: bytes, before: Sequence[str]) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if ATTEMPT.match(line):
            self.best, self.window, self.window_left = None, None, 0
            return
        in_window, self.window_left = self.window_left > 0, max(0, self.window_left - 1)
        window = self.window if in_window else None
        if NAME_LINE.match(line):
            return
        if CMAKE_ERROR.search(line):
            self.window, self.window_left = "cmake", WINDOW["cmake"]
        elif TRACEBACK.search(line):
            self.window, self.window_left = "traceback", WINDOW["traceback"]
        if window == "cmake" and line[:1].isspace() and line.strip():
            shaped = True  # the message under `CMake Error at ...:` is what CMake has to say
        else:
            shaped = ERROR_SHAPE.search(line) is not None
        if not shaped:
            return
        soc = SOC.search(line)
        if soc:
            self.soc = soc.group(0)
        rank, sig, groups = _match(line)
        if self.best is not None and (self.best.rank, self.best.line_number) <= (rank, number):
            return
        self.best = _Found(rank, number, line, sig, groups, [*before[-CONTEXT:], line], CONTEXT,
                           block=rank == RANK_BLOCK)
        if self.best.block:
            self.best.context, self.best.after = [line], BLOCK_LINES

    def _after(self, number: int, line: str) -> None:
        best = self.best
        assert best is not None
        if best.block and BLOCK_END.search(line) and len(best.context) > 1:
            best.after = 0
            return
        if best.block:  # the resolver's lines are not error-shaped, yet one may name a specific cause
            rank, sig, groups = _match(line)
            if rank == RANK_KNOWN:
                self.best = _Found(rank, number, line, sig, groups, [*best.context, line], CONTEXT, block=False)
                return
        best.after -= 1
        if not best.block or line.strip():
            best.context.append(line)

    # -- one block -----------------------------------------------------------------------------------------------
    def feed(self, block: bytes) -> None:
        """Scan `block` (whole lines). Only lines holding a marker, and the windows after a traceback or a
        CMake error, are decoded."""
        settled = self.best is not None and self.best.rank == RANK_KNOWN and self.best.after == 0
        markers = (ATTEMPT_MARKER,) if settled and not self.window_left else MARKERS + (ATTEMPT_MARKER,)
        starts = set()
        for marker in markers:
            at = block.find(marker)
            while at != -1:
                starts.add(block.rfind(b"\n", 0, at + (marker == ATTEMPT_MARKER)) + 1)
                at = block.find(marker, at + len(marker))
        if block.startswith(ATTEMPT_MARKER[1:]):
            starts.add(0)
        ordered = sorted(starts)
        counted_to, counted = 0, 0
        index, at = 0, 0
        while True:
            if self.window_left > 0 or (self.best is not None and self.best.after > 0):
                start = at  # inside a window, or collecting the lines after the cause: every line
            else:
                while index < len(ordered) and ordered[index] < at:
                    index += 1
                if index == len(ordered):
                    break
                start = ordered[index]
            if start >= len(block):
                break
            end = block.find(b"\n", start)
            end = len(block) if end == -1 else end + 1
            counted += block.count(b"\n", counted_to, start)
            counted_to = start
            number = self.line_base + counted + 1
            raw = block[start:end]
            if self.best is not None and self.best.after > 0 and self.best.line_number < number:
                self._after(number, raw.decode("utf-8", "replace").rstrip("\r\n"))
            if start in starts or self.window_left > 0:
                self._line(number, raw, self._before(block, start))
            at = end
        self.line_base += block.count(b"\n")
        tail = block[max(0, len(block) - 4096):].decode("utf-8", "replace").split("\n")[:-1]
        if len(block) > 4096:
            tail = tail[1:]  # the first piece may be the end of a longer line
        self.before = (self.before + [l.rstrip("\r") for l in tail])[-CONTEXT:]

    def _before(self, block: bytes, start: int) -> List[str]:
        lines: List[str] = []
        end = start
        while len(lines) < CONTEXT and end > 0:
            begin = block.rfind(b"\n", 0, end - 1) + 1
            lines.insert(0, block[begin:end].decode("utf-8", "replace").rstrip("\r\n"))
            end = begin
        if len(lines) < CONTEXT:
            lines = self.before[-(CONTEXT - len(lines)):] + lines
        return lines

    def result(self, host: Optional[Host] = None) -> Optional[Diagnosis]:
        best = self.best
        if best is None:
            return None
        if best.signature is None:
            return Diagnosis(None, best.line.strip(), None, best.line_number, best.line, best.context)
        host = host or Host.detect(soc=self.soc)
        if host.device is None and self.soc:
            host = Host(host.family, device_of(self.soc), host.set_env)
        groups = best.groups or ("",)
        return Diagnosis(best.signature.id, best.signature.cause.format(*groups),
                         best.signature.fix.for_host(host, groups), best.line_number, best.line, best.context)


def triage_stream(stream: BinaryIO, host: Optional[Host] = None, chunk: int = CHUNK) -> Optional[Diagnosis]:
    """The root cause of the log read from `stream` (bytes), in one pass; BadInput for a binary file."""
    scanner = Scanner()
    first = True
    while True:
        data = stream.read(chunk)
        if first and b"\x00" in data[:65536]:
            raise BadInput("that is a binary file, not a log", hint="give triage a text log")
        first = False
        if not data:
            break
        if not data.endswith(b"\n"):
            data += stream.readline(MAX_LINE)  # end the block at a line break: one copy, no carried tail
        scanner.feed(data if data.endswith(b"\n") else data + b"\n")
    return scanner.result(host)


def triage(lines: Iterable[str], host: Optional[Host] = None) -> Optional[Diagnosis]:
    """The root cause among `lines` (a command's output kept in memory, as `procs.run_logged` has it)."""
    scanner = Scanner()
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if text:
        scanner.feed(text.encode("utf-8", "replace"))
    return scanner.result(host)
