"""A big log repeats its lines, and triage reads each distinct line once (knowledge/scan.py `_Read`): what a line's
text decides is remembered, the scan's state (windows, tracebacks, facts, attempts) is not. Remembering must never
change an answer: generated over the signature table, each example is judged in a log that printed every other
example before it (so each of its lines is already remembered from another state), and the answer must be the one a
scan that remembers nothing gives.
"""

from __future__ import annotations

import io
from typing import List

import pytest

from ascend_setup.knowledge import scan
from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.scan import Scanner, triage_stream
from ascend_setup.knowledge.signatures import RESOLVER_BLOCKS, SIGNATURES, Signature

TABLE = [*SIGNATURES, *RESOLVER_BLOCKS]
EVERY_EXAMPLE = [line for sig in TABLE for line in sig.example]


def _judged(log: bytes, chunk: int = 1 << 20) -> object:
    found = triage_stream(io.BytesIO(log), host=Host(), chunk=chunk)
    return found.to_json() if found else None


def _log(sig: Signature) -> bytes:
    """The example as a traceback's source, a CMake message, a resolver's block, then alone in a later attempt."""
    lines: List[str] = [
        *sig.example,
        *EVERY_EXAMPLE,
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/x.py", line 1, in <module>',
        *sig.example,
        "CMake Error at CMakeLists.txt:1 (message):",
        *sig.example,
        "ERROR: Cannot install a and b",
        *sig.example,
        "$ python -m vllm serve again",
        *sig.example,
        *EVERY_EXAMPLE[:40],
        *sig.example,
    ]
    return "".join(line + "\n" for line in lines).encode()


@pytest.mark.parametrize("sig", TABLE, ids=[f"{i}-{s.id}" for i, s in enumerate(TABLE)])
def test_a_remembered_line_is_judged_as_a_fresh_one(sig: Signature, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _log(sig)
    remembered = [_judged(log), _judged(log, chunk=512)]
    monkeypatch.setattr(scan, "MEMO_LINE", -1)  # remember nothing: every line read afresh
    assert remembered == [_judged(log), _judged(log, chunk=512)]
    assert remembered[0] is not None


def test_each_distinct_line_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    block = "".join(line + "\n" for line in EVERY_EXAMPLE)
    reads: List[str] = []
    real = scan._Read

    def counted(line: scan.Line, catalogue: scan.Catalogue) -> scan._Read:
        reads.append(line.text)
        return real(line, catalogue)

    monkeypatch.setattr(scan, "_Read", counted)
    scanner = Scanner()
    for _ in range(50):
        scanner.feed(block.encode())
    once = len(reads)
    assert once and len(set(reads)) == once  # the first copy read each line once...
    scanner.feed(block.encode())
    assert len(reads) == once  # ...and no later copy read any line again
