"""Will a model fit a card, and how fast will it decode: the field report's two formulas, with the
arithmetic kept so a person can check it.

- Decode: tok/s ~= peak HBM bandwidth / weight bytes read per token x 0.65 (validated within 7% on a
  910B3: Qwen3-VL-8B estimated 58, measured 58.9; Qwen3.8-27B estimated 18, measured 19.3).
- KV tokens: (HBM x utilisation - weights - reserve) / KV bytes per token.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from ascend_setup.errors import BadInput
from ascend_setup.fit.model import kv_layout, load_config, text_config, weights
from ascend_setup.inputs import load_json
from ascend_setup.matrix.models import Row

CARDS = Path(__file__).resolve().parent.parent / "data" / "cards.yaml"
EFFICIENCY = 0.65
GIB = 1024 ** 3
#: Kept back for activations, graph capture and the runtime: stated in every result.
RESERVE_BYTES = 3 * GIB
KV_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "int8": 1}


@dataclass
class Card:
    name: str
    hbm_gib: float
    peak_gbps: float
    source: str


@dataclass
class Fit:
    model: str
    card: str
    weights_bytes: int
    weights_read_per_token: int
    weights_source: str
    kv_bytes_per_token: float
    kv_layers: Dict[str, int]
    state_bytes_per_sequence: int
    kv_tokens: int
    concurrency: float
    decode_tok_s: float
    bandwidth_gbps: float
    bandwidth_source: str
    blockers: List[str] = field(default_factory=list)
    serve_args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    arithmetic: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def cards() -> Dict[str, Card]:
    data = yaml.safe_load(CARDS.read_text())["cards"]
    return {name: Card(name, float(c["hbm_gib"]), float(c["peak_gbps"]), c["source"]) for name, c in data.items()}


def card_named(name: str) -> Card:
    known = cards()
    key = name.upper().removeprefix("ASCEND")
    if key not in known:
        raise BadInput(f"--card {name!r} is not a known card ({', '.join(known)})",
                       hint="or give --hbm-gib and --bandwidth for another one")
    return known[key]


def blockers_and_hints(config: Dict[str, Any], model: Path, row: Row) -> tuple:
    """(blockers, serve args, env, notes) that apply to this model on this row (from the row's hints)."""
    cfg = text_config(config)
    hints = {h.id: h for h in row.runtime_hints}
    model_type = str(config.get("model_type", cfg.get("model_type", ""))).lower()
    blockers, args, env, notes = [], [], {}, []
    quant = config.get("quantization_config") or {}
    if str(quant.get("quant_method", "")).lower() == "fp8" and not model_type.startswith("deepseek"):
        blockers.append(f"FP8 checkpoint of a {model_type or 'non-DeepSeek'} model: vllm-ascend "
                        f"{row.packages['vllm-ascend']}'s FP8 path maps every linear layer to DeepSeek's ds_linear "
                        "('...Config' object has no attribute 'o_groups'); use a ModelSlim W8A8 checkpoint instead")
    if model.is_dir() and (model / "quant_model_description.json").is_file():
        notes.append("a ModelSlim quantised checkpoint (quant_model_description.json): the safe quantised route")
    if "qkv-rmsnorm-rope" in hints:
        args += list(hints["qkv-rmsnorm-rope"].serve_args)
    if "vision_config" in config and "vision-flashcomm" in hints:
        env.update(hints["vision-flashcomm"].env)
    if model_type.startswith("qwen3") and "qwen3-thinking-off" in hints:
        args += list(hints["qwen3-thinking-off"].serve_args)
    notes.append("never judge speed with --enforce-eager: graph mode was 5.7x faster (Qwen3-VL-8B)")
    return blockers, args, env, notes


def estimate(model: Path, card: Card, row: Row, *, context: int, utilisation: float, kv_dtype: str,
             bandwidth: Optional[float] = None, bandwidth_source: str = "card-table") -> Fit:
    config = load_config(model)
    w = weights(model, config)
    kv = kv_layout(config, context, KV_DTYPE_BYTES[kv_dtype])
    bw = bandwidth if bandwidth is not None else card.peak_gbps
    budget = card.hbm_gib * GIB * utilisation - w.total_bytes - RESERVE_BYTES
    kv_tokens = max(0, int(budget // kv.per_token_bytes)) if kv.per_token_bytes else 0
    per_sequence = context * kv.per_token_bytes + kv.state_bytes_per_sequence
    concurrency = max(0.0, budget / per_sequence) if per_sequence else 0.0
    decode = bw * 1e9 / w.per_token_bytes * EFFICIENCY if w.per_token_bytes else 0.0
    blockers, args, env, notes = blockers_and_hints(config, model, row)
    if budget <= 0:
        blockers.insert(0, f"the weights ({w.total_bytes / GIB:.1f} GiB) and the reserve do not fit "
                           f"{card.hbm_gib:.0f} GiB x {utilisation:g}")
    if w.note:
        notes.insert(0, w.note)
    arithmetic = [
        f"weights: {w.total_bytes / GIB:.2f} GiB ({w.source}, {w.dtype}); read per token: "
        f"{w.per_token_bytes / GIB:.2f} GiB",
        f"KV per token: {kv.per_token_bytes / 1024:.1f} KiB ({kv.full_layers} full-attention, {kv.sliding_layers} "
        f"sliding, {kv.state_layers} fixed-state layers; {kv_dtype})"
        + (f"; fixed state {kv.state_bytes_per_sequence / 2**20:.1f} MiB per sequence" if kv.state_layers else ""),
        f"KV budget: {card.hbm_gib:g} GiB x {utilisation:g} - {w.total_bytes / GIB:.2f} GiB weights - "
        f"{RESERVE_BYTES / GIB:g} GiB reserve = {budget / GIB:.2f} GiB -> {kv_tokens:,} tokens",
        f"concurrency at {context:,} tokens: {concurrency:.1f} sequences",
        f"decode: {bw:g} GB/s / {w.per_token_bytes / 1e9:.2f} GB per token x {EFFICIENCY} = {decode:.1f} tok/s",
    ]
    return Fit(model=str(model), card=card.name, weights_bytes=w.total_bytes, weights_read_per_token=w.per_token_bytes,
               weights_source=w.source, kv_bytes_per_token=round(kv.per_token_bytes, 1), kv_layers=kv.kinds,
               state_bytes_per_sequence=kv.state_bytes_per_sequence, kv_tokens=kv_tokens,
               concurrency=round(concurrency, 2), decode_tok_s=round(decode, 1), bandwidth_gbps=bw,
               bandwidth_source=bandwidth_source, blockers=blockers, serve_args=args, env=env, notes=notes,
               arithmetic=arithmetic)


def probed_bandwidth(workdir: Path) -> Optional[float]:
    """The bandwidth `ascend-setup probe` measured on an NPU here (<workdir>/probe.json), if any."""
    if not (workdir / "probe.json").exists():
        return None
    data = load_json(workdir / "probe.json", "probe", follow=False)
    return float(data["gbps"]) if str(data.get("device", "")).startswith("npu") and data.get("gbps") else None
