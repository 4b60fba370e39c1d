"""Triage: the root cause of a log, read in one streaming pass.

Why it ranks lines the way it does (the one place this is decided):
- Each line is first read as its writer meant it (`knowledge/reader.py`: vLLM's process prefixes, `[rankN]:`,
  plog and torch_npu timestamps, ANSI, CR, literal `\\n` taken off). Tracebacks are rebuilt per process: a frame's
  source line never names a cause, the line that ends a traceback does, and of a chain ("The above exception was
  the direct cause") the first exception, which comes first in the log.
- A cause is named only by an *error-shaped* line: a Python exception line, the message under `CMake Error at`,
  the specific line of a CANN block (`EH9999  [Init][Env]init env failed!`, not `EH9999: Inner Error!`), an
  `error:`/`Error:`/`ERROR:` line or one a prefix marked ERROR, a shell's "not set" or "No such file", a loader or
  linker error. A build prints file names by the thousand (`copying .../split_qkv_rmsnorm_rope_simt.py`); a line
  of that kind never names a cause. The few lines after an error line (an exception's message, a CANN block, a
  resolver's explanation) may name a known cause even when they are not error-shaped themselves.
- A signature named by a return code alone (torch_npu's `error code is 207004`) is weak: the specific line of the
  CANN block printed right after it (`set ASCEND_RT_VISIBLE_DEVICES:... must be configured in ascending order`)
  names the cause instead, when a signature knows that line.
- The earliest line of the *last attempt* that a known signature names wins; the engine's and workers' lines win
  over the API server's, which only wrap them. A log holds every attempt (`$ command`, `=== step: reason ===`, a
  shell prompt re-running pip or python, a vLLM restart: its platform-plugin list); only the last one failed the
  way the user now sees.
  Facts (installed versions) carry over from earlier attempts: they are what the last one ran with.
- Summaries ('Failed building wheel', 'Engine core initialization failed', pip's 'subprocess-exited-with-error',
  torch_npu's 'PTA call acl api failed', CANN's 'Inner Error!') come after the cause and never name it: they are
  shown only when the log holds nothing else. A resolver's conflict block ranks below a specific cause inside it,
  an unknown error line below both, a traceback cut off before its exception below that, a warning below any error.

The pass looks at whole blocks with `bytes.find` for a few markers every interesting line carries, and decodes
only the lines around them: a 1 GB log is read in seconds, in constant memory (benchmarks/triage.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO, Callable, Dict, Iterable, List, Optional, Tuple, Union

from ascend_setup.errors import BadInput
from ascend_setup.knowledge.codes import Catalogue, Seen, find_codes, load_catalogue
from ascend_setup.knowledge.fixes import Host, device_of
from ascend_setup.knowledge.reader import MEMO, MEMO_LINE, Line, normalise
from ascend_setup.knowledge.signatures import FACTS, RESOLVER_BLOCKS, SIGNATURES, Signature

#: Every line triage must read contains one of these, or lies in a window an earlier line opened. Each marker
#: costs a full pass of bytes.find (about 1 s/GB on a loaded 2-core host; a long needle skips faster, a single
#: byte is a memchr and ten times faster), so they are few: " not " covers "is not set" and the loader's "version
#: `GLIBC_2.34' not found"; "failed" covers DCMI's and CANN's return codes; "Successfully installed" and
#: "torch-npu" are facts (installed versions); "$" (`$ command`, a shell prompt) and "platform_plugins" start
#: attempts.
MARKERS = (
    b"rror",
    b"RROR",
    b" not ",
    b"No such file",
    b"Traceback (most recent",
    b"failed",
    b"EI00",
    b"No solution",
    b"Successfully installed",
    b"torch-npu",
)
ATTEMPT_MARKERS = (b"$", b"\n=== ", b"platform_plugins")
#: Where a new attempt starts: ascend-setup's step header, our `$ command` lines, a shell prompt.
ATTEMPT = re.compile(r"^=== [\w.:-]+: .* ===$|^\$ \S|^(?:\([\w.-]+\) ?)?[\w.-]+@[\w.-]+:\S*[$#] \S")
#: A vLLM (re)start: the first thing its main process prints is the platform plugins it found (its children print
#: the same line under their own prefix, within the run).
VLLM_START = re.compile(r"Available plugins for group vllm\.platform_plugins")

#: An error-shaped line: each test is guarded by a substring it needs, so that a line holding a marker by chance
#: (a warning saying "not enough KV cache space") costs a few `in` tests, not a regex search at every position.
SHAPE_AT_START = re.compile(r"\s*(?:(?:[A-Za-z_]\w*\.)+[A-Z][A-Za-z]+: |E[A-Z0-9][A-Z0-9]?\d{3,4}\b)")  # a.b.C:, EZ9999
SHAPE_EXCEPTION = re.compile(
    r"(?:^|[\s(\[:>|'\x22])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)"
    r"(?::|\(|$)|CMake Error|\b(?:error|Error|ERROR)\b|\bfatal\b"
)
SHAPE_GUARDED = (
    (("rror", "RROR", "Exception", "Exit", "Interrupt", "fatal"), SHAPE_EXCEPTION),
    (("not set",), re.compile(r": .*\bnot set\b")),
    (("' not found",), re.compile(r"GLIBC_[\d.]+' not found")),
    (("EI",), re.compile(r"EI\d{4}")),
    # a C return code
    (("fail",), re.compile(r"\bfail(?:ed)?\b.*\b(?:ret(?:Code)?|return|result)\s*(?:is|=|\[)\s*-?\d")),
)
SHAPE_SUBSTRINGS = (
    "No such file or directory",
    "No solution found",
    "undefined symbol: ",
    "cannot open shared object file",
    "undefined reference to",
)


#: A line found by a marker, outside every window, matters only if it holds one of these: what the shape tests,
#: the facts, the attempts, tracebacks and ERROR levels need. Tested on the bytes, before decoding anything.
WORTH_READING = tuple(
    g.encode()
    for g in (
        *SHAPE_SUBSTRINGS,
        *(g for guards, _ in SHAPE_GUARDED for g in guards),
        "npu",
        "numpy",
        "$",
        "=== ",
        "platform_plugins",
        "Traceback",
        'File "',
        "CMake Error",
        "CRITICAL",
        "×",
    )
)


def error_shaped(text: str) -> bool:
    """An exception line, an error word, CANN's code, a shell's or loader's or linker's complaint."""
    if SHAPE_AT_START.match(text) or any(s in text for s in SHAPE_SUBSTRINGS):
        return True
    return any(pattern.search(text) for guards, pattern in SHAPE_GUARDED if any(g in text for g in guards))


#: Lines that name files or packages, a traceback's `raise` source lines: they never name a cause.
NAME_LINE = re.compile(
    r"^\s*(?:raise |copying |Compiling |byte-compiling |creating |adding '|removing |writing |"
    r"Copy: |"
    r"-- (?:Installing|Up-to-date|Set runtime path):|\[\s*\d+/\d+\] (?!FAILED)|\[\s*\d+%\] |"
    r"Building (?:CXX|C|ASM) object|Linking |Scanning dependencies|Collecting |Downloading |"
    r"Using cached |Requirement already satisfied|Processing |Successfully (?:installed|built) |"
    r"Installing collected|Attempting uninstall|Found existing installation|Uninstalling )"
)
#: Lines that summarise a failure without naming its cause.
NOISE = re.compile(
    r"Engine core initialization failed|^\s*FAILED: |ninja: build stopped|subprocess-exited-with-error|"
    r"This error originates from a subprocess|Failed building wheel|Failed to build|"
    r"CalledProcessError|returned non-zero exit status|Could not build wheels|"
    r"metadata-generation-failed|Encountered error while|did not run successfully|"
    r"Configuring incomplete, errors occurred|EngineDeadError|See (?:root cause|stack trace) above|"
    r"^\s*error: (?:subprocess|metadata)|make(?:\[\d+\])?: \*\*\* |Error running build_aclnn|"
    r"\bE[A-Z][A-Z0-9]?\d{3,4}:?\s+Inner Error!?\s*$|ERR\d{5} (?:PTA call acl api failed|UNKNOWN appl)|"
    r"^\[Error\]: |failed to start\.?\s*$|^CMake Error at \S+ \([\w ]+\):\s*$|^CMake Error:\s*$"
)
#: The resolver's block ends here.
BLOCK_END = re.compile(r"^To fix this you could try|^\s*hint:|^ERROR: ResolutionImpossible")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
FRAME = re.compile(r'^\s*File "(?P<path>[^"]*)", line \d+')
CARET = re.compile(r"^\s*[\^~]+\s*$")
CHAIN = re.compile(r"The above exception was the direct cause|During handling of the above exception")
#: A traceback's last line, when the frame before it had no source line (`File "<stdin>"`).
EXCEPTION_START = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt):")
SOC = re.compile(r"ascend910b\d\w*|ascend910_93\d\d|ascend310p\d\w*|ascend950\w*", re.I)
WINDOW = {"cmake": 8, "traceback": 400, "frame": 60, "follow": 12}

RANK_KNOWN, RANK_CODE, RANK_BLOCK, RANK_ERROR, RANK_TRUNCATED, RANK_WARNING, RANK_SUMMARY = range(7)
CONTEXT = 3
BLOCK_LINES = 20
CHUNK = 8 << 20
MAX_LINE = 16 << 20  # a longer line is scanned in pieces: memory stays bounded

Evidence = Tuple[int, str]
Before = Callable[[], List[str]]  # the lines before one, read only when that line becomes the cause


@dataclass
class Diagnosis:
    """One log's root cause: `id` None when no signature knows it (the line is then the most error-like one).
    `evidence` holds the earlier lines the cause was read from besides the error line (installed versions, a
    path)."""

    id: Optional[str]
    cause: str
    fix: Optional[str]
    line_number: int
    line: str
    context: List[str] = field(default_factory=list)
    evidence: List[Evidence] = field(default_factory=list)
    codes: List[CodeSeen] = field(default_factory=list)  # every code the log printed, the catalogue's and others
    reported_by: List[str] = field(default_factory=list)  # the processes that reported this cause ('' the main one)

    @property
    def processes(self) -> int:
        return max(1, len(self.reported_by))

    @property
    def unknown_codes(self) -> List[CodeSeen]:
        return [c for c in self.codes if c.seen.entry is None]

    def code_lines(self) -> List[str]:
        """'code EZ9999 (line 12): Inner Error ...' for the codes the catalogue knows, then the unknown ones."""
        known = [
            f"code {c.seen.code} (line {c.line_number}): {c.seen.entry.meaning}"
            + (" [harmless]" if c.seen.entry.kind == "harmless" else "")
            for c in self.codes
            if c.seen.entry is not None
        ]
        unknown = ", ".join(f"{c.seen.code} ({c.seen.family}, line {c.line_number})" for c in self.unknown_codes)
        return known + ([f"unknown codes: {unknown}"] if unknown else [])

    def render(self) -> str:
        around = "\n".join(f"    {line}" for line in self.context)
        fix = f"\n  fix: {self.fix}" if self.fix else ""
        seen = "".join(f"\n  evidence (log line {n}): {line}" for n, line in self.evidence)
        return f"root cause (log line {self.line_number}): {self.cause}{fix}{seen}\n{around}"

    def to_json(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "line_number": self.line_number,
            "line": self.line,
            "cause": self.cause,
            "fix": self.fix,
            "context": self.context,
            "evidence": [{"line_number": n, "line": line} for n, line in self.evidence],
            "processes": self.processes,
            "reported_by": self.reported_by,
            "codes": [c.to_json() for c in self.codes if c.seen.entry is not None],
            "unknown_codes": [c.to_json() for c in self.unknown_codes],
        }


@dataclass(frozen=True)
class CodeSeen:
    """A code and the first line that printed it."""

    seen: Seen
    line_number: int

    def to_json(self) -> Dict[str, Any]:
        entry = self.seen.entry
        found: Dict[str, Any] = {"code": self.seen.code, "family": self.seen.family, "line_number": self.line_number}
        if entry is not None:
            found.update(kind=entry.kind, meaning=entry.meaning, cause=entry.cause, fix=entry.fix, source=entry.source)
        return found


@dataclass
class _Found:
    rank: int
    api: bool  # printed by vLLM's API server: it only wraps the engine's failure
    line_number: int
    line: str
    signature: Optional[Signature]
    groups: Tuple[str, ...]
    context: List[str]
    after: int  # lines of context still to collect
    block: bool  # a resolver block: collect until BLOCK_END
    evidence: List[Evidence] = field(default_factory=list)
    code: Optional[Seen] = None  # the catalogue's code that names the cause (RANK_CODE)
    cause_key: str = ""  # what another process prints when it reports the same cause (see _cause_key)
    process: str = ""
    ordinal: int = 0  # how many lines its process had printed by then (workers' lines interleave)

    def key(self) -> Tuple[int, bool, int]:
        return self.rank, self.api, self.line_number


@dataclass
class _Traceback:
    """One process's traceback being read: its frames' facts, and its last source line (a log cut off before the
    exception is judged on it)."""

    expect_code: bool = False
    last_code: Optional[Line] = None
    facts: Dict[str, Evidence] = field(default_factory=dict)


def _cause_key(text: str, sig: Optional[Signature], code: Optional[Seen]) -> str:
    """The same cause reported by several processes: the same signature, the same code, or the same bare line."""
    if sig is not None:
        return sig.id
    return code.key if code is not None else text.strip()


Known = Tuple[int, Signature, Tuple[str, ...]]  # (rank, signature, its groups)


def _known(text: str, facts: Dict[str, Evidence]) -> Optional[Known]:
    for rank, table in ((RANK_KNOWN, SIGNATURES), (RANK_BLOCK, RESOLVER_BLOCKS)):
        for sig in table:
            m = sig.search(text)
            if m and all(name in facts for name in sig.requires):
                return rank, sig, tuple(g or "" for g in m.groups()) or ("",)
    return None


class _Read:
    """What one logical line decides whatever the state of the scan: its text (and the process and level its
    prefixes carried) alone says whether it starts an attempt, which codes and facts it prints, whether it is a
    frame, a name line, error-shaped, and which signatures it matches. A big log repeats its lines (N workers print
    the same error, a retry storm the same block), so this is worked out once per distinct physical line
    (Scanner._reads); the scan's state machine (`Scanner._logical`) then only reads these answers. The tests a
    line may never need (a traceback's, the signatures', the summaries') are made on first use."""

    __slots__ = (
        "_blank",
        "_candidates",
        "_chain",
        "_exception_start",
        "_soc",
        "_summary",
        "_warning",
        "attempt",
        "cmake",
        "codes",
        "facts",
        "foreign",
        "frame",
        "frame_code",
        "frame_facts",
        "harmless",
        "indented",
        "is_api_server",
        "level",
        "name_line",
        "process",
        "raw",
        "shaped",
        "specific",
        "text",
        "traceback",
    )

    def __init__(self, line: Line, catalogue: Catalogue) -> None:
        self.raw, self.text, self.process, self.level = line.raw, line.text, line.process, line.level
        self.foreign, self.is_api_server = line.foreign, line.is_api_server
        self._blank: Optional[bool] = None
        self._exception_start: Optional[bool] = None
        self._chain: Optional[bool] = None
        self._candidates: Optional[List[Known]] = None
        self._summary: Optional[bool] = None
        self._soc: Optional[Tuple[Optional[str]]] = None
        self._warning: Optional[bool] = None
        text = line.text
        self.attempt = bool(
            (("$" in text or text.startswith("=== ")) and ATTEMPT.search(text))
            or ("platform_plugins" in text and VLLM_START.search(text) and (not line.process or line.is_api_server))
        )
        codes = find_codes(text, catalogue) if not self.foreign and not self.attempt else []
        self.codes: Tuple[Tuple[str, Seen], ...] = tuple((seen.key, seen) for seen in codes)
        self.specific = next((c for c in codes if c.entry is not None and c.entry.kind == "specific"), None)
        self.harmless = bool(codes) and all(c.entry is not None and c.entry.kind == "harmless" for c in codes)
        self.facts: Tuple[str, ...] = (
            tuple(name for name, pattern in FACTS.items() if not name.startswith("frame:") and pattern.search(text))
            if "npu" in text or "numpy" in text
            else ()
        )
        self.traceback = "Traceback" in text and TRACEBACK.search(text) is not None
        frame = FRAME.match(text) if 'File "' in text else None
        self.frame = frame is not None
        self.frame_code = frame is not None and not frame.group("path").startswith("<")
        self.frame_facts: Tuple[str, ...] = (
            tuple(name for name, pattern in FACTS.items() if name.startswith("frame:") and pattern.search(text))
            if frame is not None
            else ()
        )
        self.name_line = NAME_LINE.match(text) is not None
        self.cmake = "CMake Error" in text
        self.indented = text[:1].isspace() and bool(text.strip())
        self.shaped = line.errorish or error_shaped(text)

    @property
    def blank(self) -> bool:
        if self._blank is None:
            stripped = self.text.strip()
            self._blank = not stripped or CARET.match(stripped) is not None
        return self._blank

    @property
    def exception_start(self) -> bool:
        if self._exception_start is None:
            self._exception_start = EXCEPTION_START.match(self.text) is not None
        return self._exception_start

    @property
    def chain(self) -> bool:
        if self._chain is None:
            self._chain = CHAIN.search(self.text) is not None
        return self._chain

    def known(self, facts: Dict[str, Evidence]) -> Optional[Known]:
        """What _known(text, facts) says: the signatures the text matches are found once, in table order, up to
        the first that requires no fact (no later one can win); the facts then pick among them."""
        if self._candidates is None:
            self._candidates = []
            for rank, table in ((RANK_KNOWN, SIGNATURES), (RANK_BLOCK, RESOLVER_BLOCKS)):
                for sig in table:
                    m = sig.search(self.text)
                    if m:
                        self._candidates.append((rank, sig, tuple(g or "" for g in m.groups()) or ("",)))
                        if not sig.requires:
                            break
                else:
                    continue
                break
        for known in self._candidates:
            if all(name in facts for name in known[1].requires):
                return known
        return None

    @property
    def summary(self) -> bool:
        if self._summary is None:
            self._summary = NOISE.search(self.text) is not None
        return self._summary

    @property
    def soc(self) -> Optional[str]:
        if self._soc is None:
            text = self.text
            soc = SOC.search(text) if "scend" in text or "SCEND" in text else None
            self._soc = (soc.group(0) if soc else None,)
        return self._soc[0]

    @property
    def warning(self) -> bool:
        """The line ranks as a warning: a warning's level or word, or only harmless codes."""
        if self._warning is None:
            self._warning = (
                self.harmless
                or self.level.startswith("WARN")
                or self.text.lstrip().upper().startswith(("WARNING", "WARN:", "DEPRECATION"))
            )
        return self._warning

    def line(self, number: int) -> Line:
        return Line(number, self.raw, self.text, self.process, self.level, self.foreign)


class Scanner:
    """Feed it blocks of bytes that end at a line break; ask `result()` at the end."""

    def __init__(self) -> None:
        self.best: Optional[_Found] = None
        self.line_base = 0  # lines before the current block
        self.before: List[str] = []  # the previous block's last lines, for context
        self.decode_left = 0  # lines still to read whatever their markers (a traceback, a block)
        self.cmake_left = 0  # lines under `CMake Error at`: its message
        self.follow_left = 0  # lines after an error line that may name a known cause
        self.tracebacks: Dict[str, _Traceback] = {}  # by process
        self.facts: Dict[str, Evidence] = {}
        self.soc: Optional[str] = None
        self.catalogue: Catalogue = load_catalogue()
        self.codes: Dict[str, CodeSeen] = {}  # every code of the log, at its first line
        self.reporters: Dict[str, List[str]] = {}  # cause key -> the processes that reported it, in order
        self.printed: Dict[str, int] = {}  # process -> lines read of it: a CANN block is counted in its process
        self.reads: Dict[bytes, Tuple[_Read, ...]] = {}  # see _reads
        self.worth: Dict[bytes, bool] = {}  # see _worth

    # -- one line ------------------------------------------------------------------------------------------------
    def _reads(self, raw: bytes) -> Tuple[_Read, ...]:
        """The logical lines of one physical line, each read once per distinct line (see _Read): a bounded number
        of lines of at most MEMO_LINE bytes are remembered (see reader.MEMO)."""
        reads = self.reads.get(raw)
        if reads is None:
            reads = tuple(_Read(line, self.catalogue) for line in normalise(0, raw.decode("utf-8", "replace")))
            if len(raw) <= MEMO_LINE:
                if len(self.reads) >= MEMO:
                    self.reads.clear()
                self.reads[raw] = reads
        return reads

    def _line(self, number: int, raw: bytes, before: Before) -> None:
        reads = self.reads.get(raw)
        for read in self._reads(raw) if reads is None else reads:
            self._logical(number, read, before)

    def _worth(self, raw: bytes) -> bool:
        """A line a marker found, outside every window: does it hold what some test needs (WORTH_READING)?"""
        worth = self.worth.get(raw)
        if worth is None:
            worth = any(map(raw.__contains__, WORTH_READING)) or raw.lstrip()[:2] == b"x "
            if len(raw) <= MEMO_LINE:
                if len(self.worth) >= MEMO:
                    self.worth.clear()
                self.worth[raw] = worth
        return worth

    def _logical(self, number: int, read: _Read, before: Before) -> None:
        """One logical line: what its text decides is in `read`; this is the state that text moves."""
        if read.foreign:  # a markdown fence, a web page's banner, a chat reply: never the log's own line
            return
        process = read.process
        self.printed[process] = self.printed.get(process, 0) + 1
        if read.attempt:
            self.best, self.decode_left, self.cmake_left, self.follow_left = None, 0, 0, 0
            self.tracebacks.clear()
            self.reporters.clear()
            return
        for key, seen in read.codes:
            if key not in self.codes:
                self.codes[key] = CodeSeen(seen, number)
        in_cmake = self.cmake_left > 0
        if in_cmake:
            self.cmake_left -= 1
        following = self.follow_left > 0
        if following:
            self.follow_left -= 1
        for name in read.facts:
            self.facts[name] = (number, read.raw)
        facts = self.facts
        exception = False
        if read.traceback:
            self.tracebacks[process] = _Traceback()
            self.decode_left = max(self.decode_left, WINDOW["traceback"])
            return
        tb = self.tracebacks.get(process) if self.tracebacks else None
        if read.frame:
            if tb is None:  # a traceback pasted from its middle
                tb = self.tracebacks[process] = _Traceback()
            tb.expect_code = read.frame_code
            for name in read.frame_facts:
                if name not in tb.facts:
                    tb.facts[name] = (number, read.raw)
            self.decode_left = max(self.decode_left, WINDOW["frame"])
            return
        if tb is not None:
            if read.blank:
                return
            if tb.expect_code and not read.exception_start:
                tb.expect_code, tb.last_code = False, read.line(number)
                return
            del self.tracebacks[process]
            if read.chain:
                return
            exception, facts = True, {**self.facts, **tb.facts}
        if read.name_line:
            return
        if read.cmake:
            self.cmake_left = WINDOW["cmake"]
        specific = read.specific
        if not (exception or read.shaped or (in_cmake and read.indented)):
            if following:  # an exception's message, a CANN block: a known cause (or code) counts here
                known = read.known(facts)
                if known and known[0] == RANK_KNOWN:
                    self._offer(number, read, known[0], known[1], known[2], facts, before)
                elif specific is not None:
                    self._offer(number, read, RANK_CODE, None, (), facts, before, specific)
            return
        self.follow_left = WINDOW["follow"]
        self.decode_left = max(self.decode_left, WINDOW["follow"])
        soc = read.soc
        if soc:
            self.soc = soc
        known = read.known(facts)
        if known:
            self._offer(number, read, known[0], known[1], known[2], facts, before)
        elif specific is not None:  # no signature: the most specific code names the cause
            self._offer(number, read, RANK_CODE, None, (), facts, before, specific)
        elif read.summary:
            self._offer(number, read, RANK_SUMMARY, None, (), facts, before)
        else:
            self._offer(number, read, RANK_WARNING if read.warning else RANK_ERROR, None, (), facts, before)

    def _report(self, key: str, process: str) -> None:
        reporters = self.reporters.setdefault(key, [])
        if process not in reporters:
            reporters.append(process)

    def _offer(
        self,
        number: int,
        line: Union[Line, _Read],
        rank: int,
        sig: Optional[Signature],
        groups: Tuple[str, ...],
        facts: Dict[str, Evidence],
        before: Before,
        code: Optional[Seen] = None,
    ) -> None:
        cause_key = _cause_key(line.text, sig, code)
        self._report(cause_key, line.process)
        best = self.best
        ordinal = self.printed.get(line.process, 0)
        explains = (
            best is not None
            and best.signature is not None
            and best.signature.weak
            and sig is not None
            and not sig.weak
            and rank == RANK_KNOWN
            and line.process == best.process
            and 0 < ordinal - best.ordinal <= WINDOW["follow"]
        )
        if best is not None and best.key() <= (rank, line.is_api_server, number) and not explains:
            return
        found = _Found(
            rank,
            line.is_api_server,
            number,
            line.raw,
            sig,
            groups,
            [*before()[-CONTEXT:], line.raw],
            CONTEXT,
            block=rank == RANK_BLOCK,
            code=code,
            cause_key=cause_key,
            process=line.process,
            ordinal=ordinal,
        )
        if sig is not None:
            found.evidence = sorted({facts[name] for name in sig.evidence if name in facts})
        if found.block:
            found.context, found.after = [line.raw], BLOCK_LINES
        self.best = found

    def _after(self, number: int, raw: str) -> None:
        best = self.best
        assert best is not None
        if best.block:  # the resolver's lines are not error-shaped, yet one may name a specific cause
            line = normalise(number, raw)[0]
            if BLOCK_END.search(line.text) and len(best.context) > 1:
                best.after = 0
                return
            known = _known(line.text, self.facts)
            if known and known[0] == RANK_KNOWN:
                self._report(known[1].id, line.process)
                self.best = _Found(
                    RANK_KNOWN,
                    best.api,
                    number,
                    raw,
                    known[1],
                    known[2],
                    [*best.context, raw],
                    CONTEXT,
                    block=False,
                    evidence=sorted({self.facts[n] for n in known[1].evidence if n in self.facts}),
                    cause_key=known[1].id,
                )
                return
        best.after -= 1
        if not best.block or raw.strip():
            best.context.append(raw)

    # -- one block -----------------------------------------------------------------------------------------------
    def feed(self, block: bytes) -> None:
        """Scan `block` (whole lines). Only lines holding a marker, and the windows after a traceback, an error
        line or a CMake error, are decoded."""
        starts = set()
        for marker in MARKERS + ATTEMPT_MARKERS:
            at = block.find(marker)
            while at != -1:
                starts.add(block.rfind(b"\n", 0, at + (marker[:1] == b"\n")) + 1)
                at = block.find(marker, at + len(marker))
        if block.startswith(b"=== "):
            starts.add(0)
        ordered = sorted(starts)
        counted_to, counted = 0, 0
        index, at = 0, 0
        while True:
            if self.decode_left > 0 or (self.best is not None and self.best.after > 0):
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
            if self.decode_left > 0:
                self.decode_left -= 1
                self._line(number, raw, partial(self._before, block, start))
            elif start in starts and (self.follow_left or self.cmake_left or self.tracebacks or self._worth(raw)):
                self._line(number, raw, partial(self._before, block, start))
            at = end
        self.line_base += counted + block.count(b"\n", counted_to)
        tail = block[max(0, len(block) - 4096) :].decode("utf-8", "replace").split("\n")[:-1]
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
            lines = self.before[-(CONTEXT - len(lines)) :] + lines
        return lines

    def _cut_off_tracebacks(self) -> None:
        """A traceback the log ends inside (a paste cut short) is judged on its last source line."""
        for tb in self.tracebacks.values():
            code = tb.last_code
            if code is None:
                continue
            facts = {**self.facts, **tb.facts}
            known = _known(code.text, facts)
            if known and known[0] == RANK_KNOWN:
                self._offer(code.number, code, RANK_KNOWN, known[1], known[2], facts, list)
            else:
                self._offer(code.number, code, RANK_TRUNCATED, None, (), facts, list)

    def result(self, host: Optional[Host] = None) -> Optional[Diagnosis]:
        self._cut_off_tracebacks()
        best = self.best
        if best is None:
            return None
        codes, reported_by = list(self.codes.values()), self.reporters.get(best.cause_key, [])
        code = best.code.entry if best.code is not None else None
        if code is not None:
            return Diagnosis(
                f"code:{code.key}",
                f"{code.code} = {code.meaning}: {code.cause}",
                code.fix,
                best.line_number,
                best.line,
                best.context,
                codes=codes,
                reported_by=reported_by,
            )
        if best.signature is None:
            meanings = [f"{c.code} = {c.entry.meaning}" for c in find_codes(best.line, self.catalogue) if c.entry]
            cause = best.line.strip() + (f" [{'; '.join(meanings)}]" if meanings else "")
            return Diagnosis(
                None, cause, None, best.line_number, best.line, best.context, codes=codes, reported_by=reported_by
            )
        host = host or Host.detect(soc=self.soc)
        if host.device is None and self.soc:
            host = Host(host.family, device_of(self.soc), host.set_env)
        groups = best.groups or ("",)
        return Diagnosis(
            best.signature.id,
            best.signature.cause.format(*groups),
            best.signature.fix.for_host(host, groups),
            best.line_number,
            best.line,
            best.context,
            best.evidence,
            codes,
            reported_by,
        )


def triage_stream(
    stream: BinaryIO, host: Optional[Host] = None, chunk: int = CHUNK, *, lines_before: int = 0
) -> Optional[Diagnosis]:
    """The root cause of the log read from `stream` (bytes), in one pass; BadInput for a binary file.
    `lines_before`: the lines of the file above where `stream` starts, so line numbers count from its top."""
    scanner = Scanner()
    scanner.line_base = lines_before
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
