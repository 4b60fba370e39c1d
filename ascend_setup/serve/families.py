"""The serve table (data/serve_families.yaml): the 0.23 tutorials' baseline and what each model family adds.

The table is data with version ranges, like the matrix's hints, so a new vllm-ascend release changes a file,
not code. This module only loads it (pydantic) and says which traits a model has.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ascend_setup.errors import BadInput
from ascend_setup.fit.config import text_config

TABLE = Path(__file__).resolve().parent.parent / "data" / "serve_families.yaml"
Trait = Literal["dense", "vision", "moe", "hybrid", "mla", "modelslim"]
STRUCTURAL = ("vision", "moe", "hybrid", "mla")


class _Ranged(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plugin: str = ""
    min_tp: int = Field(default=1, ge=1)

    @field_validator("plugin")
    @classmethod
    def _specifier(cls, value: str) -> str:
        try:
            SpecifierSet(value)
        except InvalidSpecifier:
            raise ValueError(f"{value!r} is not a version specifier") from None
        return value

    def applies(self, plugin: str, tp: int) -> bool:
        """For this vllm-ascend version and card count."""
        return SpecifierSet(self.plugin).contains(Version(plugin), prereleases=True) and tp >= self.min_tp


class EnvItem(_Ranged):
    name: str
    value: str
    why: str


class ArgItem(_Ranged):
    args: List[str] = Field(min_length=1)
    why: str


class EagerRule(_Ranged):
    """Eager mode for the plugin versions whose MLA graph kernels take only these heads per card."""

    unless_heads_per_card_in: List[int] = Field(min_length=1)
    why: str


class Family(_Ranged):
    id: str
    trait: Trait
    description: str
    args: List[ArgItem] = Field(default_factory=list)
    env: List[EnvItem] = Field(default_factory=list)
    notes: List[str] = Field(default_factory=list)
    eager: List[EagerRule] = Field(default_factory=list)


class Baseline(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env: List[EnvItem] = Field(default_factory=list)
    args: List[ArgItem] = Field(default_factory=list)


class Retired(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    removed: str
    replacement: str


class ServeTable(BaseModel):
    model_config = ConfigDict(extra="forbid")
    baseline: Baseline
    families: List[Family]
    retired: List[Retired] = Field(default_factory=list)


@lru_cache(maxsize=None)
def load_table(path: Path = TABLE) -> ServeTable:
    try:
        return ServeTable.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise BadInput(f"serve table {path}: {' '.join(str(exc).split())[:300]}") from None


def traits(config: Dict[str, Any], has_quant_description: bool) -> List[str]:
    """What kind of model config.json describes; a model may be several (Qwen3-VL-30B-A3B: vision and moe)."""
    cfg = text_config(config)
    found = []
    if isinstance(config.get("vision_config"), dict):
        found.append("vision")
    if int(cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts") or 0) > 0:
        found.append("moe")
    kinds = [str(t).lower() for t in cfg.get("layer_types") or []]
    if cfg.get("full_attention_interval") or any(("linear" in t or "mamba" in t or "delta" in t) for t in kinds):
        found.append("hybrid")
    if cfg.get("kv_lora_rank"):
        found.append("mla")
    if not found:
        found.append("dense")
    if has_quant_description:
        found.append("modelslim")
    return found


def families_for(found: List[str], plugin: str, tp: int, table: Optional[ServeTable] = None) -> List[Family]:
    """The table's families for these traits, in the table's order, that hold for this plugin version."""
    table = table or load_table()
    return [f for f in table.families if f.trait in found and f.applies(plugin, tp)]
