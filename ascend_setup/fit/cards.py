"""The card table (data/cards.yaml), checked by pydantic: HBM, bandwidth and the decode model of each card, each
figure with where it came from. A card naming a decode model the file does not hold is refused at load."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from typing_extensions import Annotated

from ascend_setup.errors import BadInput
from ascend_setup.fit.decode import Terms

GIB = 1024**3
CARDS = Path(__file__).resolve().parent.parent / "data" / "cards.yaml"
NO_IDLE_FIGURE = "no published figure of what the idle card holds: none counted"

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Measurement(Strict):
    """One measured single-stream decode speed, with the bytes per token fit counts for that model."""

    model: str
    bytes_from: str
    tok_s: Annotated[float, Field(gt=0, le=100_000, allow_inf_nan=False)]
    bandwidth_gbps: Positive
    bytes_per_token: Positive


class DecodeModel(Strict):
    """time per token = t_fixed + bytes per token / (eta x bandwidth), and what the terms were fitted on."""

    eta: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
    t_fixed_ms: Annotated[float, Field(ge=0, lt=1000, allow_inf_nan=False)]
    t_fixed_ms_multi_card: Annotated[float, Field(ge=0, lt=1000, allow_inf_nan=False)]
    multi_card_source: str
    t_fixed_ms_eager: Annotated[float, Field(ge=0, lt=1000, allow_inf_nan=False)]
    eager_source: str
    context: Annotated[int, Field(gt=0)]  # the context the measurements' KV bytes were counted at
    source: str
    measurements: List[Measurement] = Field(min_length=1)

    def terms(self, tp: int = 1) -> Terms:
        return Terms(self.eta, (self.t_fixed_ms if tp == 1 else self.t_fixed_ms_multi_card) / 1000)

    def eager_terms(self, tp: int = 1) -> Terms:
        """--enforce-eager: the eager fixed cost (at TP > 1 the larger of it and the multi-card floor)."""
        fixed = self.t_fixed_ms_eager if tp == 1 else max(self.t_fixed_ms_eager, self.t_fixed_ms_multi_card)
        return Terms(self.eta, fixed / 1000)


class CardSpec(Strict):
    hbm_gib: Positive
    peak_gbps: Positive
    copy_gbps: Optional[Positive] = None
    decode: str
    source: str
    visible_bytes: Optional[Annotated[int, Field(gt=0)]] = None  # torch_npu's total memory, when published
    visible_source: Optional[str] = None
    idle_bytes: Optional[Annotated[int, Field(ge=0)]] = None  # what the idle card holds inside it, when published
    idle_source: Optional[str] = None


class CardTable(Strict):
    decode_models: Dict[str, DecodeModel]
    cards: Dict[str, CardSpec]

    @model_validator(mode="after")
    def _known_decode_models(self) -> CardTable:
        for name, card in self.cards.items():
            if card.decode not in self.decode_models:
                raise ValueError(f"card {name} names decode model {card.decode!r}, which is not in decode_models")
        return self


@dataclass
class Card:
    name: str
    hbm_gib: float
    peak_gbps: float
    source: str
    decode: DecodeModel
    decode_name: str
    visible_bytes: int = 0  # the memory vLLM multiplies by the utilisation (torch_npu's total memory)
    visible_source: str = ""
    idle_bytes: int = 0  # what the idle card holds inside the visible memory
    idle_source: str = NO_IDLE_FIGURE
    in_use_bytes: Optional[int] = None  # this host's measurement of a new process's start (probe): context included
    in_use_source: str = ""


def load_table(path: Path = CARDS) -> CardTable:
    try:
        return CardTable.model_validate(yaml.safe_load(path.read_text()))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(
            f"card table {path}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}",
            hint="the card table ships with ascend-setup: reinstall it",
        ) from None


def cards() -> Dict[str, Card]:
    table = load_table()
    return {
        name: Card(
            name,
            c.hbm_gib,
            c.peak_gbps,
            c.source,
            table.decode_models[c.decode],
            c.decode,
            *visible(c.hbm_gib, c.visible_bytes, c.visible_source),
            c.idle_bytes or 0,
            c.idle_source or NO_IDLE_FIGURE,
        )
        for name, c in table.cards.items()
    }


def visible(hbm_gib: float, published: Optional[int], source: Optional[str]) -> Tuple[int, str]:
    """(bytes, source) of the device-visible memory: the published figure, else the HBM size taken as it."""
    if published and source:
        return published, source
    return int(hbm_gib * GIB), f"no published torch_npu figure: {hbm_gib:g} GiB of HBM taken as visible"


def with_visible(card: Card, total_bytes: int, source: str) -> Card:
    """The card with this host's own device-visible memory (probe.json's total_memory)."""
    card.visible_bytes, card.visible_source = total_bytes, source
    return card


def with_in_use(card: Card, in_use_bytes: int, source: str) -> Card:
    """The card with what a new process found taken on this host's NPU (probe.json's in_use_memory): its own
    context and what the card held, measured rather than added up from the table."""
    card.in_use_bytes, card.in_use_source = in_use_bytes, source
    return card


def card_key(name: str) -> str:
    """A card's name as the table spells it: 'Ascend910B3', 'ascend910b3' and '910b3' are the 910B3."""
    upper = name.upper()
    return upper[len("ASCEND") :] if upper.startswith("ASCEND") else upper


def card_for(name: str, hbm_gib: Optional[float] = None, bandwidth: Optional[float] = None) -> Card:
    """A card of the table (its HBM overridable), or any card (310P, 910C, a custom one) given both
    figures, labelled with what was given; a card outside the table decodes with the A2's model, said so."""
    known = cards()
    key = card_key(name)
    if key in known:
        card = known[key]
        if hbm_gib:
            card.hbm_gib, card.source = hbm_gib, f"{card.source}; HBM given: --hbm-gib {hbm_gib:g}"
            card.visible_bytes, card.visible_source = visible(hbm_gib, None, None)
        return card
    if hbm_gib and bandwidth:
        a2 = known["910B3"]
        return Card(
            name,
            hbm_gib,
            bandwidth,
            f"given: --hbm-gib {hbm_gib:g} --bandwidth {bandwidth:g}; decode "
            f"model of the 910B3 ({a2.decode_name}) assumed",
            a2.decode,
            a2.decode_name,
            *visible(hbm_gib, None, None),
        )
    raise BadInput(
        f"--card {name!r} is not a known card ({', '.join(known)})",
        hint="or give --hbm-gib and --bandwidth for another one (310P, 910C, ...)",
    )


def card_named(name: str) -> Card:
    return card_for(name)
