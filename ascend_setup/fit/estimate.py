"""Will a model fit a card, and how fast will it decode: the field report's two formulas, with the
arithmetic kept so a person can check it.

- Decode: tok/s ~= peak HBM bandwidth / weight bytes read per token x 0.65 (validated within 7% on a
  910B3: Qwen3-VL-8B estimated 58, measured 58.9; Qwen3.8-27B estimated 18, measured 19.3).
- KV tokens: (HBM x utilisation - weights - reserve) / KV bytes per token, per card under --tp.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from ascend_setup.errors import BadInput
from ascend_setup.fit.config import text_config
from ascend_setup.fit.model import ModelFiles, kv_layout, weights
from ascend_setup.utils.inputs import load_json
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.serve_hints import merged_serve_args

CARDS = Path(__file__).resolve().parent.parent / "data" / "cards.yaml"
EFFICIENCY = 0.65
GIB = 1024 ** 3
#: Kept back on every card for activations, graph capture and the runtime: stated in every result.
RESERVE_BYTES = 3 * GIB
KV_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "int8": 1}
#: What --tp assumes of the per-layer all-reduces: stated in every result that uses it.
TP_ASSUMPTION = ("--tp {tp}: weights and KV split over {tp} cards, a {reserve:g} GiB reserve on each; the "
                 "all-reduces (2 per layer over HCCS) are assumed hidden, so the decode figure is an upper bound")


@dataclass
class Card:
    name: str
    hbm_gib: float
    peak_gbps: float
    source: str


@dataclass
class Fit:
    model: str
    origin: str
    card: str
    card_source: str
    tp: int
    fits: bool
    headline: str
    weights_bytes: int
    weights_per_card_bytes: int
    weights_read_per_token: int
    weights_source: str
    vision_bytes: int
    kv_bytes_per_token: float
    kv_layers: Dict[str, int]
    state_bytes_per_sequence: int
    kv_tokens: int
    concurrency: float
    decode_tok_s: Optional[float]  # None when the model does not fit: no speed for what cannot run
    bandwidth_gbps: float
    bandwidth_source: str
    blockers: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    serve_args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    arithmetic: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def cards() -> Dict[str, Card]:
    data = yaml.safe_load(CARDS.read_text())["cards"]
    return {name: Card(name, float(c["hbm_gib"]), float(c["peak_gbps"]), c["source"]) for name, c in data.items()}


def card_for(name: str, hbm_gib: Optional[float] = None, bandwidth: Optional[float] = None) -> Card:
    """A card of the table (its HBM overridable), or any card (310P, 910C, a custom one) given both
    figures, labelled with what was given."""
    known = cards()
    key = name.upper().removeprefix("ASCEND")
    if key in known:
        card = known[key]
        return Card(card.name, hbm_gib, card.peak_gbps, f"{card.source}; HBM given: --hbm-gib {hbm_gib:g}") \
            if hbm_gib else card
    if hbm_gib and bandwidth:
        return Card(name, hbm_gib, bandwidth, f"given: --hbm-gib {hbm_gib:g} --bandwidth {bandwidth:g}")
    raise BadInput(f"--card {name!r} is not a known card ({', '.join(known)})",
                   hint="or give --hbm-gib and --bandwidth for another one (310P, 910C, ...)")


def card_named(name: str) -> Card:
    return card_for(name)


def blockers_and_hints(files: ModelFiles, row: Row) -> tuple:
    """(blockers, serve args, env, notes) that apply to this model on this row (from the row's hints)."""
    config = files.config
    cfg = text_config(config)
    hints = {h.id: h for h in row.hints()}
    model_type = str(config.get("model_type", cfg.get("model_type", ""))).lower()
    blockers, args, notes = [], [], []
    env: Dict[str, str] = {}
    given = config.get("quantization_config")
    quant = given if isinstance(given, dict) else {}
    if str(quant.get("quant_method", "")).lower() == "fp8" and not model_type.startswith("deepseek"):
        blockers.append(f"FP8 checkpoint of a {model_type or 'non-DeepSeek'} model: vllm-ascend "
                        f"{row.packages['vllm-ascend']}'s FP8 path maps every linear layer to DeepSeek's ds_linear "
                        "('...Config' object has no attribute 'o_groups'); use a ModelSlim W8A8 checkpoint instead")
    if files.quant_description:
        notes.append("a ModelSlim quantised checkpoint (quant_model_description.json): the safe quantised route")
    if "qkv-rmsnorm-rope" in hints:
        args += list(hints["qkv-rmsnorm-rope"].serve_args)
    if "vision_config" in config and "vision-flashcomm" in hints:
        env.update(hints["vision-flashcomm"].env)
        args += list(hints["vision-flashcomm"].serve_args)
    if model_type.startswith("qwen3") and "qwen3-thinking-off" in hints:
        args += list(hints["qwen3-thinking-off"].serve_args)
    notes.append("never judge speed with --enforce-eager: graph mode was 5.7x faster (Qwen3-VL-8B)")
    return blockers, merged_serve_args(args), env, notes


def _kv_share(config: Dict[str, Any], tp: int) -> float:
    """The share of a token's KV one card holds: KV heads split over the cards (replicated when there are
    fewer heads than cards); an MLA latent is whole on every card."""
    cfg = text_config(config)
    if tp == 1 or cfg.get("kv_lora_rank"):
        return 1.0
    heads = int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    return max(1.0 / tp, 1.0 / heads)


def check_tp(config: Dict[str, Any], tp: int) -> None:
    heads = int(text_config(config)["num_attention_heads"])
    if tp < 1 or heads % tp:
        raise BadInput(f"--tp {tp} does not divide the model's {heads} attention heads",
                       hint="vLLM needs num_attention_heads divisible by the tensor-parallel size")


def estimate(files: ModelFiles, card: Card, row: Row, *, context: int, utilisation: float, kv_dtype: str,
             bandwidth: Optional[float] = None, bandwidth_source: str = "card-table", tp: int = 1) -> Fit:
    config = files.config
    check_tp(config, tp)
    w = weights(files)
    kv = kv_layout(config, context, KV_DTYPE_BYTES[kv_dtype])
    share = _kv_share(config, tp)
    kv_card = kv.per_token_bytes * share
    state_card = int(kv.state_bytes_per_sequence / tp)
    bw = bandwidth if bandwidth is not None else card.peak_gbps
    weights_card = math.ceil(w.total_bytes / tp)
    budget = card.hbm_gib * GIB * utilisation - weights_card - RESERVE_BYTES
    fits = budget > 0
    kv_tokens = max(0, int(budget // kv_card)) if kv_card and fits else 0
    per_sequence = context * kv_card + state_card
    concurrency = max(0.0, budget / per_sequence) if per_sequence and fits else 0.0
    decode = bw * 1e9 / (w.per_token_bytes / tp) * EFFICIENCY if w.per_token_bytes else 0.0
    blockers, args, env, notes = blockers_and_hints(files, row)
    warnings = []
    if not fits:
        blockers.insert(0, f"the weights ({weights_card / GIB:.1f} GiB per card) and the {RESERVE_BYTES / GIB:g} GiB "
                           f"reserve do not fit {card.hbm_gib:g} GiB x {utilisation:g}"
                           + ("" if tp > 1 else "; try --tp N over several cards, or a quantised checkpoint"))
    max_pos = text_config(config).get("max_position_embeddings")
    if max_pos and context > max_pos:
        warnings.append(f"--context {context:,} is above the model's max_position_embeddings {max_pos:,}: vLLM "
                        "refuses a longer --max-model-len unless the rope is scaled; concurrency is counted as given")
    if w.note:
        notes.insert(0, w.note.lstrip("; "))
    if tp > 1:
        notes.insert(0, TP_ASSUMPTION.format(tp=tp, reserve=RESERVE_BYTES / GIB))
    per = " per card" if tp > 1 else ""
    arithmetic = [
        f"weights: {w.total_bytes / GIB:.2f} GiB ({w.source}, {w.dtype}"
        + (f", vision tower {w.vision_bytes / GIB:.2f} GiB resident" if w.vision_bytes else "")
        + f"); read per token: {w.per_token_bytes / GIB:.2f} GiB"
        + (f"; {weights_card / GIB:.2f} GiB per card" if tp > 1 else ""),
        f"KV per token{per}: {kv_card / 1024:.1f} KiB ({kv.full_layers} full-attention, {kv.sliding_layers} "
        f"sliding, {kv.state_layers} fixed-state layers; {kv_dtype})"
        + (f"; fixed state {state_card / 2**20:.1f} MiB per sequence" if kv.state_layers else ""),
        f"KV budget{per}: {card.hbm_gib:g} GiB x {utilisation:g} - {weights_card / GIB:.2f} GiB weights - "
        f"{RESERVE_BYTES / GIB:g} GiB reserve = {budget / GIB:.2f} GiB -> {kv_tokens:,} tokens",
        f"concurrency at {context:,} tokens: {concurrency:.1f} sequences",
        (f"decode: {bw:g} GB/s / {w.per_token_bytes / tp / 1e9:.2f} GB per token{per} x {EFFICIENCY} = "
         f"{decode:.1f} tok/s"
         if fits else "decode: not estimated, the model does not fit"),
    ]
    fit = Fit(model=files.name, origin=files.origin, card=card.name, card_source=card.source, tp=tp, fits=fits,
              headline="", weights_bytes=w.total_bytes, weights_per_card_bytes=weights_card,
              weights_read_per_token=w.per_token_bytes, weights_source=w.source, vision_bytes=w.vision_bytes,
              kv_bytes_per_token=round(kv_card, 1), kv_layers=kv.kinds, state_bytes_per_sequence=state_card,
              kv_tokens=kv_tokens, concurrency=round(concurrency, 2), decode_tok_s=round(decode, 1) if fits else None,
              bandwidth_gbps=bw, bandwidth_source=bandwidth_source, blockers=blockers, warnings=warnings,
              serve_args=args, env=env, notes=notes, arithmetic=arithmetic)
    fit.headline = headline(fit, context)
    return fit


def headline(fit: Fit, context: int) -> str:
    """One line that agrees with the figures: no speed for a model that does not fit, the blocker first."""
    where = f"{fit.model} on " + (f"{fit.tp} x " if fit.tp > 1 else "an ") + f"Ascend {fit.card}"
    if not fit.fits:
        return f"{where}: does not fit ({fit.blockers[0]})"
    figures = (f"{fit.kv_tokens:,} KV tokens, {fit.concurrency:.1f} sequences of {context:,}, about "
               f"{fit.decode_tok_s:.0f} tok/s single-stream")
    if fit.blockers:
        return f"{where}: fits but will not load ({fit.blockers[0].split(':')[0]}); if it did: {figures}"
    return f"{where}: {figures}"


def probed_bandwidth(workdir: Path) -> Optional[float]:
    """The bandwidth `ascend-setup probe` measured on an NPU here (<workdir>/probe.json), if any; a figure
    that is not a bandwidth (-5, nan) is bad input, not a speed."""
    path = workdir / "probe.json"
    if not path.exists():
        return None
    data = load_json(path, "probe", follow=False)
    if not isinstance(data, dict) or not str(data.get("device", "")).startswith("npu"):
        return None
    gbps = data.get("gbps")
    if isinstance(gbps, bool) or not isinstance(gbps, (int, float)) or not math.isfinite(gbps) or gbps <= 0:
        raise BadInput(f"probe result {path}: gbps {str(gbps)[:20]} is not a bandwidth",
                       hint="run 'ascend-setup probe' again, or pass --bandwidth")
    return float(gbps)
