"""`ascend-setup triage` over every real log of the shared corpora (../shared/triage-corpus*), each judged against
its INDEX.tsv row. A corpus directory dropped in beside the others (with its INDEX.tsv) is read too.

The corpus README's rule, read strictly: a triage points at the right line when it points at `root_cause_line`, or
at `alt_line` (the error line, when the root cause is a context line) while naming the right cause. It names the
right cause when its id is ours for the corpus's cause name (CAUSE_IDS) and it gives a fix: a hit that names no
cause is a miss. A log with no failure (`cause` none) must name no cause. The goal: the right line on 49 of 50,
the cause with its fix on 48 of 50 (one and two misses in fifty).

Text pasted with a log is never its answer: every log is triaged again wrapped in what users paste around one (a
markdown fence, a web page's banner, a chat reply, an issue title in bold), and must give the same answer.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

import pytest

from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.scan import Diagnosis, triage_stream

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CORPORA = sorted(p for p in SHARED.glob("triage-corpus*") if (p / "INDEX.tsv").is_file())
#: The corpora's cause names (theirs) -> the ids (signatures, or `code:` entries of the error-code catalogue) that
#: name that cause.
CAUSE_IDS: Dict[str, FrozenSet[str]] = {
    # ../shared/triage-corpus
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
    "aclgraph-capture-stream-exhausted": frozenset({"graph-capture-streams", "code:inner:0x7020023"}),
    "driver-not-mounted-in-container": frozenset({"libascend-hal"}),
    "torch-npu-triton-ascend-pairing": frozenset({"triton-ascend-missing"}),
    # ../shared/triage-corpus-2
    "no-cxx-compiler": frozenset({"cxx-compiler-missing"}),
    "cann-8.2-breaking-change-custom-kernels": frozenset({"ascendc-kernel-compile"}),
    "npu-initialized-before-fork": frozenset({"npu-forked-subprocess"}),
    "visible-devices-not-ascending": frozenset({"visible-devices-order"}),
    "hccl-device-index-bug-old-cann": frozenset({"code:inner:0x7010003"}),
    "npu-oom-gpu-memory-utilization-too-high": frozenset({"npu-oom"}),
    "quantization-ascend-needs-newer-vllm-ascend": frozenset({"quantization-ascend-unknown"}),
    "w8a8-fp16-scale-unsupported": frozenset({"op-dtype-unsupported"}),
    "hccp-previous-process-still-running": frozenset({"code:cann:EJ0001"}),
    "moe-op-unsupported-on-310p": frozenset({"op-unsupported-on-soc"}),
    "npu-occupied-by-other-container": frozenset({"dcmi-init-failed", "code:dcmi:-8005"}),
    "cann-kernels-package-missing": frozenset({"cann-kernels-missing"}),
    "torch-cpu-index-missing-for-torch-npu": frozenset({"torch-cpu-local-version"}),
    "no-set-device-in-new-thread": frozenset({"no-context-set-device"}),
    "torch-npu-too-old-missing-op": frozenset({"torch-npu-unpaired"}),
    "torch-npu-dev-build-needs-ascend-index": frozenset({"torch-npu-index"}),
    "host-glibc-too-old-for-bishengir": frozenset({"glibc-too-old-cann"}),
    "broken-vllm-install-shadows-import": frozenset({"broken-namespace-package"}),
    "python-3.9-unsupported": frozenset({"python-too-old-pep604"}),
    "visible-device-index-out-of-range-in-vm": frozenset({"visible-devices-range"}),
    "ray-npus-registered-as-gpu": frozenset({"ray-npu-as-gpu"}),
    "first-gen-ascend910-unsupported": frozenset({"cann-kernels-missing"}),
    "soc-version-104-unsupported": frozenset({"soc-unsupported"}),
    "container-dcmi-driver-libs-not-mounted": frozenset({"dcmi-library-missing"}),
    "vllm-worker-fork-after-npu-init": frozenset({"npu-forked-subprocess"}),
}
#: What users paste around a log (before it, after it): none of it is a line of the log.
FENCE = (["Here is the log:", "```text"], ["```"])
BANNER = (["**NETWORK ERROR DUE TO HIGH TRAFFIC. PLEASE REGENERATE OR REFRESH THIS PAGE.**", ""], [])
CHAT = (
    ["I get this error when I start the server:", "### Error log"],
    ["Any idea what causes this error? Thanks!", "It looks like the runtime failed: a RuntimeError: error code 5."],
)
TITLE = (["**RuntimeError: the server does not start (error code is 207004)**"], ["> quoted: see the error above"])
WRAPPINGS = {
    "fence": FENCE,
    "banner": BANNER,
    "chat": CHAT,
    "title": TITLE,
    "all": tuple([line for w in (BANNER, TITLE, CHAT, FENCE) for line in w[i]] for i in (0, 1)),
}


def _rows(corpus: Path) -> List[Dict[str, str]]:
    with (corpus / "INDEX.tsv").open(newline="") as index:
        return list(csv.DictReader(index, delimiter="\t"))


ROWS = [pytest.param(corpus, row, id=f"{corpus.name}/{row['file']}") for corpus in CORPORA for row in _rows(corpus)]
needs_corpus = pytest.mark.skipif(not CORPORA, reason=f"no shared triage corpus beside the repository ({SHARED})")


def _triage(data: bytes) -> Optional[Diagnosis]:
    return triage_stream(io.BytesIO(data), host=Host())


def _judge(row: Dict[str, str], diagnosis: Optional[Diagnosis]) -> Tuple[bool, bool, str]:
    """(the right line, the right cause with its fix, what was wrong)."""
    found = diagnosis.id if diagnosis else None
    if row["cause"] == "none":
        return found is None, found is None, "" if found is None else f"named {found} on a log with no failure"
    cause = found in CAUSE_IDS.get(row["cause"], frozenset()) and bool(diagnosis and diagnosis.fix)
    line = (diagnosis.line if diagnosis else "") or ""
    right_line = row["root_cause_line"] in line or bool(cause and row["alt_line"] and row["alt_line"] in line)
    why = [] if cause else [f"named {found}, not {row['cause']}"]
    if not right_line:
        why.append(f"pointed at line {diagnosis.line_number if diagnosis else None}: {line[:160]!r}")
    return right_line, cause, "; ".join(why)


@needs_corpus
def test_the_real_corpora_are_triaged_right() -> None:
    judged = {
        f"{c.name}/{r['file']}": _judge(r, _triage((c / r["file"]).read_bytes())) for c in CORPORA for r in _rows(c)
    }
    total = len(judged)
    lines = sum(line for line, _, _ in judged.values())
    causes = sum(cause for _, cause, _ in judged.values())
    wrong = {name: why for name, (line, cause, why) in judged.items() if not (line and cause)}
    assert lines >= total - total // 50, (lines, total, wrong)
    assert causes >= total - 2 * (total // 50), (causes, total, wrong)


@needs_corpus
@pytest.mark.parametrize(("corpus", "row"), ROWS)
def test_the_command_gives_each_real_log_the_answer_triage_gives_it(cli, corpus: Path, row: Dict[str, str]) -> None:
    """The CLI, as a user runs it, on every real log: its exit code says whether a cause was named."""
    proc = cli("triage", "--json", str(corpus / row["file"]))
    data = json.loads(proc.stdout)
    assert proc.returncode == (1 if data["id"] is None else 0), proc.stderr
    expected = _triage((corpus / row["file"]).read_bytes())
    assert (data["id"], data["line"]) == ((expected.id, expected.line) if expected else (None, None))
    if row["cause"] == "none":
        assert data["id"] is None


@needs_corpus
@pytest.mark.parametrize("wrapping", sorted(WRAPPINGS))
@pytest.mark.parametrize(("corpus", "row"), ROWS)
def test_text_pasted_around_a_real_log_never_becomes_its_answer(
    corpus: Path, row: Dict[str, str], wrapping: str
) -> None:
    body = (corpus / row["file"]).read_bytes()
    before, after = WRAPPINGS[wrapping]
    wrapped = (
        "".join(f"{l}\n" for l in before).encode()
        + body
        + (b"" if body.endswith(b"\n") else b"\n")
        + "".join(f"{l}\n" for l in after).encode()
    )
    plain, pasted = _triage(body), _triage(wrapped)
    answer = (plain.id, plain.line) if plain else (None, None)
    assert ((pasted.id, pasted.line) if pasted else (None, None)) == answer
    if plain is not None and pasted is not None:
        assert pasted.line_number == plain.line_number + len(before)
