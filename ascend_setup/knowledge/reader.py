"""A log line as its writer meant it: the prefixes other programs put in front of it taken off.

Why: vLLM 0.9+ runs the engine and its workers in child processes and prefixes every line they print
(`(EngineCore_DP0 pid=N) ERROR 11-27 08:19:08 [core.py:708] `, `(VllmWorker rank=3 pid=N) `, `[rank1]: `, Ray's
`(RayWorkerWrapper pid=N, ip=A) `); torch_npu and CANN's plog add `[ERROR] 2025-08-05-08:05:26 (PID:N, ...) ` or
`[ERROR] HCCL(N,python3):<time> [file.cc:100] `; terminals add ANSI colours, Windows adds CR, a log pasted from
JSON has literal `\\n`. A traceback is only visible once those are gone, and the signatures are written for the
bare text. The level a prefix carried is kept (an `[ERROR]` plog line is an error line), and so is the process
(the API server's wrapper exception ranks below the engine's root cause).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import List, Tuple

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: `(EngineCore_DP0 pid=14421) `, `(VllmWorker rank=3 pid=112081) `, `(APIServer pid=1) `,
#: `(RayWorkerWrapper pid=9, ip=10.0.0.2) `
PROCESS = re.compile(r"\((?P<proc>[A-Za-z_][\w-]*(?: [^()]*?)? ?pid=\d+[^()]*)\)\s?")
RANK = re.compile(r"\[(?P<proc>rank\d+)\]:\s?")
#: vLLM's logger: `ERROR 11-27 08:19:08 [core.py:708] ` (optionally with the year and milliseconds)
VLLM_LEVEL = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?:\d{4}-)?\d\d-\d\d "
    r"\d\d:\d\d:\d\d(?:[.,]\d+)? (?:\[[^\]]*\] ?)?"
)
#: torch_npu / CANN plog: `[ERROR] 2025-08-05-08:05:26 (PID:5, Device:0, RankID:-1) `,
#: `[ERROR] HCCL(2717288,python3):2025-07-23-03:47:57.070.463 [hccl_socket.cc:100] `
PLOG_LEVEL = re.compile(
    r"\[(?P<level>ERROR|WARNING|WARN|INFO|DEBUG|TRACE|EVENT)\] ?(?:[A-Z_]+\(\d+,[^)]*\):)?"
    r"\d{4}-\d\d-\d\d[-\s]\d\d:\d\d:\d\d(?:[.,:]\d+)*\s*(?:\(PID:[^)]*\)\s*)?"
    r"(?:\[[\w.-]+:\d+\]\s*)?"
)
#: Python's logging default: `WARNING:root:`
PY_LOGGING = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:")
#: A bare timestamp: `[2026-12-01 08:45:40] `, `2024-01-02T03:04:05.123Z `
TIMESTAMP = re.compile(r"\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+")
#: uv's and pip's diagnostic trees: `  x `, `  × `, `  |-> `, `` `-> ``, `│ `, `╰─> `
TREE = re.compile(r"\s*(?:(?P<level>[x×])(?= )|[|│├╰`]?\s*(?:->|─▶|─>)|[|│](?=\s))\s*")
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "x", "×"})
#: Text pasted with a log that no program printed: a markdown fence, a line in bold or a heading (an issue's title),
#: a web page's banner, a chat reply around the log. Written at the start of a line, unindented (an indented `**x`
#: is a call's continuation in a traceback).
FOREIGN = re.compile(
    r"\s*(?:```|~~~)|(?:\*\*(?!\*)\S|#{1,6}\s|>\s)|"
    r"(?:I|I'm|I've|I'd|We|We're|My|You|You're|Your|Thanks|Thank you|Any idea|Anyone|Can anyone|"
    r"Can you|Could you|Could someone|Hi|Hello|Here is|Here's|Hope|Did you|Have you|Sorry|"
    r"It looks like|It seems|Looks like)[ ,!.:?]"
)
BANNERS = ("NETWORK ERROR DUE TO HIGH TRAFFIC", "PLEASE REGENERATE OR REFRESH")


def is_foreign(text: str, process: str, level: str) -> bool:
    """Not a line of the log (see FOREIGN): a line a program prefixed is always the log's."""
    if level or process:
        return False
    return FOREIGN.match(text) is not None or BANNERS[0] in text or BANNERS[1] in text


@dataclass
class Line:
    """One logical line: `text` is what its writer printed, `raw` the physical line it came from."""

    number: int
    raw: str
    text: str
    process: str = ""  # 'EngineCore_DP0 pid=14421', 'VllmWorker rank=3 pid=7', 'rank1', ... ('' for none)
    level: str = ""  # the level a stripped prefix carried ('ERROR', ...), '' for none
    foreign: bool = False  # not a line of the log (see is_foreign)

    @property
    def is_api_server(self) -> bool:
        """The API server only wraps the engine's failure (`Engine core initialization failed`)."""
        return self.process.startswith("APIServer")

    @property
    def errorish(self) -> bool:
        return self.level in ERROR_LEVELS


#: Which prefixes can start with a character: most lines start with none of these, and cost one dict lookup.
_BY_FIRST = {
    c: tuple(
        p
        for p, starts in (
            (PROCESS, "("),
            (RANK, "["),
            (VLLM_LEVEL, "DIWEC"),
            (PLOG_LEVEL, "["),
            (PY_LOGGING, "DIWEC"),
            (TIMESTAMP, "[0123456789"),
        )
        if c in starts
    )
    for c in "([DIWEC0123456789"
}
_TREE_START = " \tx×|│├╰`"


def strip_prefixes(text: str) -> Tuple[str, str, str]:
    """(text, process, level) with every known prefix taken off the front, in any order and number."""
    process, level = "", ""
    while text:
        for pattern in _BY_FIRST.get(text[0], ()):
            m = pattern.match(text)
            if m:
                groups = m.groupdict()
                process = groups.get("proc") or process
                level = groups.get("level") or level
                text = text[m.end() :]
                break
        else:
            break
    m = TREE.match(text) if text[:1] in _TREE_START else None
    if m and m.end() > 0:
        level = m.group("level") or level
        text = text[m.end() :]
    return text, process, level


#: A big log repeats its lines (N workers print the same error, a retry storm the same warning): what a line's text
#: alone decides is worked out once for this many distinct lines of at most MEMO_LINE characters (memory stays
#: bounded: a few MB per table).
MEMO, MEMO_LINE = 1 << 14, 512


def normalise(number: int, raw: str) -> List[Line]:
    """The logical lines of one physical line: usually one; several when a pasted log kept literal `\\n`."""
    raw = raw.rstrip("\r\n")
    return [Line(number, *read) for read in (_remembered(raw) if len(raw) <= MEMO_LINE else _read(raw))]


def _read(raw: str) -> Tuple[Tuple[str, str, str, str, bool], ...]:
    """(raw, text, process, level, foreign) of each logical line."""
    bare = ANSI.sub("", raw) if "\x1b" in raw else raw
    pieces = bare.split("\\n") if "\\n" in bare and ("Traceback" in bare or bare.count("\\n") > 1) else [bare]
    read = [(raw if len(pieces) == 1 else piece, *strip_prefixes(piece.rstrip("\r"))) for piece in pieces]
    return tuple(
        (raw_piece, text, process, level, is_foreign(text, process, level)) for raw_piece, text, process, level in read
    )


_remembered = lru_cache(maxsize=MEMO)(_read)
