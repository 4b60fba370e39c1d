"""`ascend-setup triage` over the 25 real logs of ../shared/triage-corpus, each judged against its INDEX.tsv row.

The corpus README's rule, read strictly: a triage is right when it names the cause (our id for the corpus's cause
name, CAUSE_IDS) and points at `root_cause_line`, or at `alt_line` (the error line, when the root cause is a
context line that the triage then shows as evidence). The successful build (`cause` none) must name no cause.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Dict, FrozenSet, List

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "triage-corpus"
#: The corpus's cause names (its own) -> the signature ids that name that cause.
CAUSE_IDS: Dict[str, FrozenSet[str]] = {
    "setuptools-too-old-root-dir": frozenset({"root-dir-unset"}),
    "cann-toolkit-without-compiler": frozenset({"bisheng-missing", "setenv-bash-missing"}),
    "cann-devel-headers-missing-dlog": frozenset({"dlog-missing"}),
    "nnal-atb-not-installed": frozenset({"libatb"}),
    "nnal-cann-version-mismatch": frozenset({"nnal-cann-mismatch"}),
    "numpy2-with-cann": frozenset({"numpy2-cann"}),
    "vllm-torch-api-newer-than-torch-npu": frozenset({"torch-api-mismatch"}),
    "glibc-too-old-for-wheel": frozenset({"glibc-too-old"}),
    "torch-npu-version-not-paired": frozenset({"torch-npu-unpaired"}),
    "cann-python-deps-missing": frozenset({"cann-init-env"}),
    "cwd-shadows-installed-vllm": frozenset({"source-shadow"}),
    "torch-cpu-index-missing": frozenset({"torch-cpu-local-version"}),
    "cwd-shadows-torch-npu-source": frozenset({"source-shadow"}),
    "cann-tbe-python-pkg-not-importable": frozenset({"cann-te-not-importable"}),
    "hccl-listen-port-in-use": frozenset({"hccl-port-in-use"}),
    "kernel-meta-dir-not-writable": frozenset({"kernel-meta-permission"}),
    "pypi-vllm-pulls-cuda-triton": frozenset({"vllm-cuda-triton"}),
    "triton-ascend-not-on-pypi": frozenset({"triton-ascend-index"}),
    "soc-build-target-mismatch": frozenset({"soc-build-mismatch"}),
    "triton-ascend-unsupported-on-310p": frozenset({"triton-ascend-target"}),
    "aclgraph-capture-stream-exhausted": frozenset({"graph-capture-streams"}),
    "driver-not-mounted-in-container": frozenset({"libascend-hal"}),
    "torch-npu-triton-ascend-pairing": frozenset({"triton-ascend-missing"}),
}
GOAL = 24


def _rows() -> List[Dict[str, str]]:
    with (CORPUS / "INDEX.tsv").open(newline="") as index:
        return list(csv.DictReader(index, delimiter="\t"))


def _verdict(row: Dict[str, str], data: dict) -> str:
    """'' when the triage is right, else why not."""
    if row["cause"] == "none":
        return "" if data["id"] is None else f"named {data['id']} on a log with no failure"
    if data["id"] not in CAUSE_IDS[row["cause"]]:
        return f"named {data['id']}, not {row['cause']}"
    line = data["line"] or ""
    if row["root_cause_line"] in line or (row["alt_line"] and row["alt_line"] in line):
        return ""
    return f"pointed at line {data['line_number']}: {line[:160]!r}"


@pytest.mark.skipif(not (CORPUS / "INDEX.tsv").is_file(),
                    reason=f"the shared triage corpus is not beside the repository ({CORPUS})")
def test_the_real_corpus_is_triaged_right(cli) -> None:
    rows = _rows()
    assert len(rows) == 25 and {r["cause"] for r in rows} - {"none"} <= set(CAUSE_IDS)
    wrong: Dict[str, str] = {}
    for row in rows:
        proc = cli("triage", "--json", str(CORPUS / row["file"]))
        data = json.loads(proc.stdout)
        assert proc.returncode == (1 if data["id"] is None else 0), proc.stderr
        verdict = _verdict(row, data)
        if verdict:
            wrong[row["file"]] = verdict
    none = [r["file"] for r in rows if r["cause"] == "none"]
    assert not set(none) & set(wrong), wrong
    assert len(rows) - len(wrong) >= GOAL, wrong
