"""Several processes failing in one log (vLLM's DP/TP workers, torch's ranks): triage names the first root cause in
time and says how many processes reported it, whether their lines come one block after another or interleave.

Generated from the signature table: each signature's example is printed by N workers under each prefix family.
"""

from __future__ import annotations

import io
from typing import Callable, Dict, List, Tuple

import pytest

from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.scan import triage_stream
from ascend_setup.knowledge.signatures import SIGNATURES, Signature

#: prefix family -> (the process tag of worker i, the prefix it prints with that tag)
PREFIXES: Dict[str, Tuple[Callable[[int], str], str]] = {
    "vllm-worker": (
        lambda i: f"VllmWorker rank={i} pid={4100 + i}",
        "({}) ERROR 08-04 12:34:15 [multiproc_executor.py:546] ",
    ),
    "worker-tp": (lambda i: f"Worker_TP{i} pid={551 + i}", "({}) ERROR 10-15 03:21:23 [multiproc_executor.py:671] "),
    "rank": (lambda i: f"rank{i}", "[{}]: "),
}
ORDERS = ("blocks", "interleaved")
#: One signature per id: the first of the table.
FIRST = list({sig.id: sig for sig in reversed(SIGNATURES)}.values())
CASES = [
    pytest.param(sig, prefix, order, n, id=f"{sig.id}-{prefix}-{order}-{n}")
    for sig in FIRST
    for prefix in PREFIXES
    for order in ORDERS
    for n in (2, 4)
]


def _printed(sig: Signature, prefix: str, order: str, n: int) -> List[str]:
    tag, form = PREFIXES[prefix]
    if order == "blocks":
        return [form.format(tag(i)) + line for i in range(n) for line in sig.example]
    return [form.format(tag(i)) + line for line in sig.example for i in range(n)]


@pytest.mark.parametrize("sig, prefix, order, n", CASES)
def test_the_first_root_cause_is_named_with_the_number_of_processes_that_reported_it(
    sig: Signature, prefix: str, order: str, n: int
) -> None:
    lines = _printed(sig, prefix, order, n)
    diagnosis = triage_stream(io.BytesIO("".join(f"{l}\n" for l in lines).encode()), host=Host())
    cause_at = next(i for i, line in enumerate(sig.example) if sig.pattern.search(line))
    assert diagnosis is not None and diagnosis.id == sig.id, diagnosis and diagnosis.line
    assert diagnosis.line_number == 1 + (cause_at if order == "blocks" else cause_at * n)
    assert diagnosis.processes == n and diagnosis.reported_by == [PREFIXES[prefix][0](i) for i in range(n)]


def test_a_root_cause_on_one_rank_wins_over_the_timeouts_it_causes_on_the_others() -> None:
    port = next(s for s in SIGNATURES if s.id == "hccl-port-in-use").example[0]
    timeout = "EI0006: Getting socket times out. Reason: 1. The remote does not initiate a connect request."
    lines = [f"[rank2]: {port}", *(f"[rank{i}]: {timeout}" for i in (0, 1, 3)), f"[rank2]: {timeout}"]
    diagnosis = triage_stream(io.BytesIO("".join(f"{l}\n" for l in lines).encode()), host=Host())
    assert diagnosis is not None and diagnosis.id == "hccl-port-in-use" and diagnosis.line_number == 1
    assert diagnosis.reported_by == ["rank2"]
