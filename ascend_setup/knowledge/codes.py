"""Ascend's error codes as data (data/error_codes.yaml): what each code printed in a log means, its usual cause,
its fix and where that is written.

Why a catalogue and not one signature per code: a real Ascend log is full of codes (CANN's `EZ9999`, ACL's
`207008`, HCCL's `error code is 15`, the runtime's `err:0x7010003`, DCMI's `-8005`, torch_npu's `ERR02200`), and a
new CANN adds codes, not causes: a new code is a data change. This module knows how each family of codes is
printed (`find_codes`) and loads the catalogue through the loading gate; triage (knowledge/scan.py) decides which
code names the cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Literal, Optional, Pattern, Tuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from typing_extensions import Annotated

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import Name, Prose, check_yaml_shape, read_input_text, validate

CATALOGUE = Path(__file__).resolve().parent.parent / "data" / "error_codes.yaml"
HINT = "the error-code catalogue ships with ascend-setup: reinstall it"

Family = Literal["cann", "acl", "hccl", "inner", "dcmi", "pta"]
Kind = Literal["specific", "generic", "harmless"]
Url = Annotated[str, Field(strict=True, min_length=12, max_length=512, pattern=r"^https://\S+$")]

#: How each family is printed. One regex per family, its code in the first group that matched. A CANN code must
#: also not follow a word character (see _is_code): a lookbehind here would cost the regex its fast literal scan.
FAMILY_PATTERNS: Dict[str, Pattern[str]] = {
    "cann": re.compile(r"(E[0-9A-Z]\d{4})(?=[:(\s\]]|$)"),
    "acl": re.compile(
        r"(?:error code is|error code:|runtime result =|result = |ErrCode=|errno:|ret=|failed: )"
        r" ?(\d{6})\b"
    ),
    "hccl": re.compile(
        r"HCCL function error: .*error code is (\d{1,3})\b|hcclRet -> (\d{1,3})\b|"
        r"HCCL error code is (\d{1,3})\b|\bret\[(\d{1,3})\]|return\[(\d{1,3})\]"
    ),
    "inner": re.compile(r"(?:\berr|retCode|InnerCode)\s*[:=]\s*(0x[0-9a-fA-F]{7,8})\b"),
    "dcmi": re.compile(r"\bret(?: is|\(| =) ?(-80\d\d)\b"),
    "pta": re.compile(r"\b(ERR\d{5})\b"),
}
#: A line can hold a code only if it holds one of these (tested before any regex: most lines hold none).
GUARDS: Dict[str, Tuple[str, ...]] = {
    "cann": ("E",),
    "acl": ("error code", "result", "ErrCode", "errno", "ret=", "failed: "),
    "hccl": ("HCCL", "hcclRet", "ret[", "return["),
    "inner": ("0x",),
    "dcmi": ("ret",),
    "pta": ("ERR",),
}


class CodeEntry(BaseModel):
    """One code: how it reads in a log, what it means, what usually causes it, what fixes it, and the source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: Name
    family: Family
    kind: Kind
    meaning: Prose
    cause: Prose
    fix: Prose
    source: Url

    @model_validator(mode="after")
    def _printable(self) -> CodeEntry:
        if FAMILY_PATTERNS[self.family].search(sample_line(self.family, self.code)) is None:
            raise ValueError(f"code {self.code!r} is not how the {self.family} family prints its codes")
        return self

    @property
    def key(self) -> str:
        return f"{self.family}:{self.code}"


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    codes: List[CodeEntry] = Field(min_length=1)
    _by_key: Dict[str, CodeEntry] = PrivateAttr(default_factory=dict)

    def model_post_init(self, __context: object) -> None:
        self._by_key.update((c.key, c) for c in self.codes)

    @field_validator("codes")
    @classmethod
    def _unique(cls, codes: List[CodeEntry]) -> List[CodeEntry]:
        keys = [c.key for c in codes]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"codes listed twice: {', '.join(twice)}")
        return codes

    def lookup(self, family: str, code: str) -> Optional[CodeEntry]:
        return self._by_key.get(f"{family}:{code}")


def sample_line(family: str, code: str) -> str:
    """A log line that prints `code` the way its family does: what the catalogue test feeds triage, too."""
    return {
        "cann": f"{code}: [PID: 42] 2025-01-01-00:00:00.000.000 something failed",
        "acl": f"RuntimeError: call failed, error code is {code}",
        "hccl": f"RuntimeError: HCCL function error: hcclCommInitRootInfo(), error code is {code}",
        "inner": f"get error: device error, err:{code}[FUNC:Run][FILE:api.cc][LINE:1]",
        "dcmi": f"dcmi module initialize failed. ret is {code}",
        "pta": f"[ERROR] 2025-01-01-00:00:00 (PID:42, Device:0, RankID:-1) {code} call failed",
    }[family]


@dataclass(frozen=True)
class Seen:
    """A code found on a line: its family, the code as printed, and its catalogue entry (None: unknown)."""

    family: str
    code: str
    entry: Optional[CodeEntry]

    @property
    def key(self) -> str:
        return f"{self.family}:{self.code}"


def find_codes(text: str, catalogue: Optional[Catalogue] = None) -> List[Seen]:
    """Every code printed on `text`, in the order of the families above, each once."""
    catalogue = catalogue or load_catalogue()
    found: List[Seen] = []
    for family, pattern in FAMILY_PATTERNS.items():
        if not any(g in text for g in GUARDS[family]):
            continue
        for m in pattern.finditer(text):
            if family == "cann" and m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_.-"):
                continue
            code = next(g for g in m.groups() if g)
            if all(s.key != f"{family}:{code}" for s in found):
                found.append(Seen(family, code, catalogue.lookup(family, code)))
    return found


def parse_catalogue(text: str, source: str) -> Catalogue:
    check_yaml_shape(text, source, hint=HINT)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise BadInput(f"{source} is not valid YAML", hint=HINT) from None
    return validate(Catalogue, data, source, hint=HINT)


@lru_cache(maxsize=4)
def load_catalogue(path: Path = CATALOGUE) -> Catalogue:
    return parse_catalogue(
        read_input_text(path, "codes", what=f"error-code catalogue {path}", hint=HINT), f"error-code catalogue {path}"
    )
