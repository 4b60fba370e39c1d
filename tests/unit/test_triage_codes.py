"""Ascend's error codes as data: each code of the catalogue, printed the way its family prints it, is read and its
meaning shown; with no signature, the most specific code names the cause; a harmless code never does; a code the
catalogue lacks is listed as unknown."""

from __future__ import annotations

import io
import json
from typing import List, Optional

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.knowledge.codes import CodeEntry, load_catalogue, parse_catalogue, sample_line
from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.scan import Diagnosis, triage_stream

ENTRIES = load_catalogue().codes
#: Real lines (vllm-ascend#11696's plog) that a healthy graph capture prints.
CAPTURE_NOISE = [
    "[ERROR] RUNTIME(809924,4):2026-07-11-15:11:05.293.967 [api_c.cc:1081]809924 rtMemcpy:ErrCode=107030, "
    "desc=[the current capture mode does not support this operation], InnerCode=0x703001c",
    "[ERROR] ASCENDCL(809924,4):2026-07-11-15:11:05.294.152 [memory.cpp:608]809924 aclrtMemcpyImpl:synchronized "
    "memcpy failed, kind = 1, runtime result = 107030",
]


def _triage(lines: List[str]) -> Optional[Diagnosis]:
    return triage_stream(io.BytesIO("".join(f"{l}\n" for l in lines).encode()), host=Host())


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.key)
def test_each_code_of_the_catalogue_is_read_and_its_meaning_shown(entry: CodeEntry) -> None:
    diagnosis = _triage(["INFO starting", sample_line(entry.family, entry.code), "INFO done"])
    assert diagnosis is not None and diagnosis.line_number == 2
    assert [c.seen.entry for c in diagnosis.codes] == [entry] and diagnosis.unknown_codes == []
    assert entry.meaning in "\n".join(diagnosis.code_lines())
    if entry.kind == "specific":  # named by the code, or by a signature that knows this code in context
        assert diagnosis.id is not None and diagnosis.fix
        if diagnosis.id.startswith("code:"):
            assert (diagnosis.id, diagnosis.fix) == (f"code:{entry.key}", entry.fix) and entry.cause in diagnosis.cause
    else:  # a code that only says something failed, or a harmless one, never names the cause itself
        assert not (diagnosis.id or "").startswith("code:")
        if diagnosis.id is None:
            assert entry.meaning in diagnosis.cause


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.key)
def test_each_code_has_its_source_meaning_cause_and_fix(entry: CodeEntry) -> None:
    assert entry.source.startswith("https://") and entry.meaning and entry.cause and entry.fix


def test_with_no_signature_the_most_specific_code_names_the_cause() -> None:
    generic_first = [
        "[rank1]: RuntimeError: create_config: HCCL function error: hcclCommInitRootInfoConfig(), error code is 15",
        "[rank1]: [ERROR] 2025-04-27-03:11:08 (PID:5, Device:0, RankID:1) ERR02200 DIST call hccl api failed.",
        "[rank1]: EE9999: Inner Error!",
        "[rank1]: EE9999: [PID: 5] get error: phyid:0 realDeviceId:0 is err:0x7010003[FUNC:x]",
        "[rank1]: rtGetDeviceIndexByPhyId execute failed, reason=[device id error], retCode=0x7020023",
    ]
    diagnosis = _triage(generic_first)
    assert diagnosis is not None and diagnosis.id == "code:inner:0x7010003" and diagnosis.line_number == 4
    assert [c.seen.code for c in diagnosis.codes] == ["15", "ERR02200", "EE9999", "0x7010003", "0x7020023"]
    signature_later = _triage([*generic_first, "[rank1]: EI0006: Getting socket times out."])
    assert signature_later is not None and signature_later.id == "hccl-socket-timeout"  # a signature beats a code


def test_a_harmless_code_is_never_the_cause() -> None:
    only = _triage(CAPTURE_NOISE)
    assert only is not None and only.id is None and "does not affect inference" not in only.cause
    assert {c.seen.entry.kind for c in only.codes if c.seen.entry} == {"harmless"}
    after = _triage([*CAPTURE_NOISE, "RuntimeError: something else broke"])
    assert after is not None and after.line == "RuntimeError: something else broke"
    before = _triage(["RuntimeError: something else broke", *CAPTURE_NOISE])
    assert before is not None and before.line == "RuntimeError: something else broke"


def test_a_code_the_catalogue_lacks_is_listed_as_unknown_and_names_nothing() -> None:
    diagnosis = _triage(["RuntimeError: aclSomething failed, error code is 507999", "EZ8123: a new failure"])
    assert diagnosis is not None and diagnosis.id is None
    assert [(c.seen.family, c.seen.code) for c in diagnosis.unknown_codes] == [("acl", "507999"), ("cann", "EZ8123")]
    assert diagnosis.to_json()["unknown_codes"][0] == {"code": "507999", "family": "acl", "line_number": 1}


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda c: c + [c[0]], "codes listed twice"),
        (lambda c: [{**c[0], "family": "acl"}], "is not how the acl family prints its codes"),
        (lambda c: [{**c[0], "source": "see the forum"}], "source"),
        (lambda c: [{**c[0], "kind": "fatal"}], "kind"),
    ],
)
def test_a_catalogue_entry_that_cannot_be_read_from_a_log_or_has_no_source_is_refused(change, why) -> None:
    entry = {
        "code": "EJ0001",
        "family": "cann",
        "kind": "specific",
        "meaning": "m",
        "cause": "c",
        "fix": "f",
        "source": "https://example.invalid/EJ0001",
    }
    with pytest.raises(BadInput) as caught:
        parse_catalogue(json.dumps({"codes": change([entry])}), "catalogue")
    assert why in caught.value.one_line()
