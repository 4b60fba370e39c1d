"""Every known signature, in every framing real logs put around it, names the same line and the same cause.

Generated from the table: each signature's `example` (the lines a real log shows for it) is wrapped in the vLLM
engine's and workers' prefixes, Ray's, `[rankN]:`, torch_npu's timestamped `[ERROR]`, ANSI colours, CRLF, a log
pasted with literal `\\n`, a failed attempt before it, and a warning storm after it.
"""

from __future__ import annotations

import io
import re
from typing import Callable, Dict, List, Tuple

import pytest

from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.scan import triage_stream
from ascend_setup.knowledge.signatures import RESOLVER_BLOCKS, SIGNATURES, Signature

ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: (lines before the example, the lines as the framing prints them, the line ending)
Framed = Tuple[int, List[str], str]


def _prefixed(prefix: str) -> Callable[[List[str]], Framed]:
    return lambda lines: (0, [prefix + line for line in lines], "\n")


def _other_failure(sig: Signature) -> List[str]:
    """A different known failure, for the attempt before the one that counts."""
    other = next(
        s
        for s in SIGNATURES
        if s.id not in (sig.id, "no-space") and not s.requires and not s.pattern.search("\n".join(sig.example))
    )
    return ["$ ascend-setup install --cann 9.1.0", "Collecting torch==2.10.0", *other.example, "[exit 1]"]


def _attempt_before(sig: Signature) -> Callable[[List[str]], Framed]:
    def frame(lines: List[str]) -> Framed:
        before = [*_other_failure(sig), "$ vllm serve /models/Qwen3-8B --port 8000"]
        return len(before), before + lines, "\n"

    return frame


STORM = (
    "WARNING 11-27 08:19:09 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 "
    "seconds; retrying after a transient error"
)
FRAMINGS: Dict[str, Callable[[Signature], Callable[[List[str]], Framed]]] = {
    "bare": lambda sig: _prefixed(""),
    "vllm-engine": lambda sig: _prefixed("(EngineCore_DP0 pid=14421) ERROR 11-27 08:19:08 [core.py:708] "),
    "vllm-worker": lambda sig: _prefixed(
        "(VllmWorker rank=3 pid=112081) ERROR 07-17 08:06:53 [multiproc_executor.py:487] "
    ),
    "ray-worker": lambda sig: _prefixed(
        "(RayWorkerWrapper pid=5123, ip=10.0.0.2) ERROR 07-17 08:06:53 [worker_base.py:620] "
    ),
    "rank": lambda sig: _prefixed("[rank1]: "),
    "torch-npu-error": lambda sig: _prefixed("[ERROR] 2025-08-05-08:05:26 (PID:504068, Device:0, RankID:-1) "),
    "ansi": lambda sig: lambda lines: (0, [f"\x1b[1;31m{line}\x1b[0m" for line in lines], "\n"),
    "crlf": lambda sig: lambda lines: (0, lines, "\r\n"),
    "pasted-literal-newlines": lambda sig: lambda lines: (0, ["\\n".join(lines + [""])], "\n"),
    "attempt-before": _attempt_before,
    "warning-storm-after": lambda sig: lambda lines: (0, lines + [STORM] * 800, "\n"),
}
CASES = [
    pytest.param(sig, name, id=f"{sig.id}#{index}-{name}")
    for index, sig in enumerate((*SIGNATURES, *RESOLVER_BLOCKS))
    for name in FRAMINGS
]


@pytest.mark.parametrize("sig, framing", CASES)
def test_a_signature_names_its_line_in_every_framing(sig: Signature, framing: str) -> None:
    cause_at = next(i for i, line in enumerate(sig.example) if sig.pattern.search(line))
    offset, lines, ending = FRAMINGS[framing](sig)(list(sig.example))
    data = "".join(line + ending for line in lines).encode()
    diagnosis = triage_stream(io.BytesIO(data), host=Host())
    assert diagnosis is not None, framing
    assert diagnosis.id == sig.id, (framing, diagnosis.line)
    expected = 1 if framing == "pasted-literal-newlines" else offset + cause_at + 1
    assert diagnosis.line_number == expected, (framing, diagnosis.line)
    assert sig.example[cause_at] in ANSI.sub("", diagnosis.line)
    assert diagnosis.fix
