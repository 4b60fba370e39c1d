"""SOC_VERSION -> device type (A2, A3, 310P, A5), the way vllm-ascend decides which card a build is for.

A vllm_ascend wheel runs only on the device type it was built for: the worker asserts that its
`_build_info.__device_type__` matches the NPU. The table is data (`data/soc_versions.yaml`, read from
upstream's setup.py) so that a new release's entries are a data change.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from ascend_setup.utils.files import read_regular_text

SOC_TABLE = Path(__file__).resolve().parent.parent / "data" / "soc_versions.yaml"
#: Where a vllm-ascend build records the device type it was made for (its setup.py writes it).
BUILD_INFO = "vllm_ascend/_build_info.py"


class DeviceType(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    cards: str
    example: str


class SocTable(BaseModel):
    """The packaged table; every SOC, substring and alias names a known device type or SOC."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    devices: Dict[str, DeviceType]
    socs: Dict[str, str]
    contains: Dict[str, str]
    board_aliases: Dict[str, str]

    @model_validator(mode="after")
    def _known_names(self) -> SocTable:
        bad = [f"{s}: {d}" for s, d in {**self.socs, **self.contains}.items() if d not in self.devices]
        bad += [f"{a}: {s}" for a, s in self.board_aliases.items() if s not in self.socs]
        if bad:
            raise ValueError(f"names no known device type or SOC: {', '.join(bad)}")
        return self


@lru_cache(maxsize=1)
def soc_table() -> SocTable:
    return SocTable.model_validate(yaml.safe_load(read_regular_text(SOC_TABLE)))


def device_of(soc: Optional[str]) -> Optional[str]:
    """The device type a build for `soc` is made for (upstream's name, e.g. '_310P'); None if upstream
    would refuse the SOC_VERSION."""
    if not soc:
        return None
    table, key = soc_table(), soc.strip().lower()
    if key in table.socs:
        return table.socs[key]
    return next((d for part, d in table.contains.items() if part in key), None)


def parse_device(text: str) -> Optional[str]:
    """A device type given by name ('A3', 'a2', '310P', '_310P') -> upstream's name; None otherwise."""
    wanted = text.strip().upper().lstrip("_")
    return next((name for name, d in soc_table().devices.items() if d.label.upper() == wanted), None)


def label(device: Optional[str]) -> str:
    """How a device type is printed: '310P' for upstream's '_310P'; '?' when unknown."""
    if device is None:
        return "?"
    found = soc_table().devices.get(device)
    return found.label if found else device


def board_alias(chip_name: str) -> Optional[str]:
    """The fixed SOC_VERSION of a chip name upstream maps by name (A2G3 -> ascend910b1)."""
    lower = chip_name.lower()
    return next((soc for part, soc in soc_table().board_aliases.items() if part in lower), None)


def _assigned_strings(text: str) -> Dict[str, str]:
    """Module-level `NAME = 'literal'` assignments, read without running the file."""
    found: Dict[str, str] = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return found
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def build_info_device(text: str) -> str:
    """The device type a `vllm_ascend/_build_info.py` says, as vllm-ascend reads it at start-up:
    `__device_type__`, else (older builds) '_310P' when `__soc_version__` names a 310P, else A2."""
    values = _assigned_strings(text)
    if "__device_type__" in values:
        return values["__device_type__"]
    return "_310P" if "310P" in values.get("__soc_version__", "ASCEND910B1").upper() else "A2"
