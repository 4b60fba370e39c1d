"""Will a model fit a card, and how fast will it decode, with the arithmetic kept so a person can check it.

- Decode: time per token = t_fixed + bytes read per token / (eta x bandwidth) (fit/decode.py), the terms the
  card's (fitted on the field report's two measurements) or this host's (fit/calibration.py). Given at a short
  context (the measurements') and at the end of a --context-long sequence, whose KV every token reads.
- KV tokens: (HBM x utilisation - weights - reserve) / KV bytes per token, per card under --tp.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from ascend_setup.errors import BadInput
from ascend_setup.fit.calibration import Calibration
from ascend_setup.fit.cards import Card
from ascend_setup.fit.config import text_config
from ascend_setup.fit.decode import KV_DTYPE_BYTES, Prediction, bytes_per_token, kv_share, predict
from ascend_setup.fit.model_files import ModelFiles, kv_layout, weights
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.serve_hints import merged_serve_args
from ascend_setup.utils.inputs import load_json

GIB = 1024 ** 3
#: Kept back on every card for activations, graph capture and the runtime: stated in every result.
RESERVE_BYTES = 3 * GIB
#: What --tp assumes of the per-layer all-reduces: stated in every result that uses it.
TP_ASSUMPTION = ("--tp {tp}: weights and KV split over {tp} cards, a {reserve:g} GiB reserve on each; the "
                 "all-reduces (2 per layer over HCCS) are counted only in the multi-card fixed cost ({fixed:g} ms: "
                 "{source}), so the decode figure is an upper bound")


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
    decode_tok_s_at_context: Optional[float]  # at the end of a --context-long sequence (its KV read every token)
    decode: Dict[str, Any]  # both terms, the bytes, and what the speed is bound by
    speed_source: str  # the card's decode model, or this host's calibration
    bandwidth_gbps: float
    bandwidth_source: str
    blockers: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    serve_args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    arithmetic: List[str] = field(default_factory=list)
    calibration: List[Dict[str, Any]] = field(default_factory=list)  # this host's points, each judged

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


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


def check_tp(config: Dict[str, Any], tp: int) -> None:
    heads = int(text_config(config)["num_attention_heads"])
    if tp < 1 or heads % tp:
        raise BadInput(f"--tp {tp} does not divide the model's {heads} attention heads",
                       hint="vLLM needs num_attention_heads divisible by the tensor-parallel size")


def _decode_line(at: int, per: str, p: Prediction, terms_eta: float, bw: float) -> str:
    return (f"decode at {at:,} tokens{per}: {p.fixed_s * 1000:.2f} ms fixed + {p.bytes_per_token / 1e9:.2f} GB / "
            f"({terms_eta:.3f} x {bw:g} GB/s) = {p.fixed_s * 1000:.2f} + {p.bandwidth_s * 1000:.2f} = "
            f"{p.seconds * 1000:.2f} ms per token -> {p.tok_s:.1f} tok/s ({p.bound}-bound)")


def _decode_json(p: Prediction) -> Dict[str, Any]:
    return {"bytes_per_token": round(p.bytes_per_token), "fixed_ms": round(p.fixed_s * 1000, 3),
            "bandwidth_ms": round(p.bandwidth_s * 1000, 3), "tok_s": round(p.tok_s, 1), "bound": p.bound}


def estimate(files: ModelFiles, card: Card, row: Row, *, context: int, utilisation: float, kv_dtype: str,
             bandwidth: Optional[float] = None, bandwidth_source: str = "card-table", tp: int = 1,
             calibration: Optional[Calibration] = None) -> Fit:
    """The fit; `calibration` (this host's terms) replaces the card's decode terms when given."""
    config = files.config
    check_tp(config, tp)
    w = weights(files)
    kv = kv_layout(config, context, KV_DTYPE_BYTES[kv_dtype])
    share = kv_share(config, tp)
    kv_card = kv.per_token_bytes * share
    state_card = int(kv.state_bytes_per_sequence / tp)
    bw = bandwidth if bandwidth is not None else card.peak_gbps
    weights_card = math.ceil(w.total_bytes / tp)
    budget = card.hbm_gib * GIB * utilisation - weights_card - RESERVE_BYTES
    fits = budget > 0
    kv_tokens = max(0, int(budget // kv_card)) if kv_card and fits else 0
    per_sequence = context * kv_card + state_card
    concurrency = max(0.0, budget / per_sequence) if per_sequence and fits else 0.0
    terms = calibration.terms if calibration else card.decode.terms(tp)
    speed_source = calibration.source if calibration else (
        f"the card's decode model ({card.decode_name}: {card.decode.source})")
    short_context = min(context, card.decode.context)
    short, at_context = (predict(terms, bytes_per_token(files, context=c, kv_dtype=kv_dtype, tp=tp), bw)
                         for c in (short_context, context))
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
        notes.insert(0, TP_ASSUMPTION.format(tp=tp, reserve=RESERVE_BYTES / GIB, fixed=terms.t_fixed_s * 1000,
                                             source="this host's measurements" if calibration
                                             else card.decode.multi_card_source))
    if fits and short.bound == "launch":
        notes.insert(0, f"launch-bound, not bandwidth-bound: the fixed {short.fixed_s * 1000:.2f} ms per token is "
                        f"most of its {short.seconds * 1000:.2f} ms" + (f" at TP {tp}: more cards do not make it faster"
                                                                         if tp > 1 else "")
                        + "; more bandwidth barely helps")
    for judged in (calibration.points if calibration else []):
        if not judged.used:
            notes.append(f"host measurement not used: {judged.point.model} at {judged.point.tok_s:.1f} tok/s "
                         f"({judged.point.measured_at}): {judged.why}")
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
    ]
    if fits:
        arithmetic += [f"decode: time per token = t_fixed + bytes per token / (eta x bandwidth); eta {terms.eta:.3f}, "
                       f"t_fixed {terms.t_fixed_s * 1000:.2f} ms",
                       _decode_line(short_context, per, short, terms.eta, bw)]
        if context != short_context:
            arithmetic.append(_decode_line(context, per, at_context, terms.eta, bw))
    else:
        arithmetic.append("decode: not estimated, the model does not fit")
    decode = {"eta": round(terms.eta, 4), "t_fixed_ms": round(terms.t_fixed_s * 1000, 3),
              "method": calibration.method if calibration else "card", "context": short_context,
              **_decode_json(short), "at_context": {"context": context, **_decode_json(at_context)}}
    fit = Fit(model=files.name, origin=files.origin, card=card.name, card_source=card.source, tp=tp, fits=fits,
              headline="", weights_bytes=w.total_bytes, weights_per_card_bytes=weights_card,
              weights_read_per_token=w.per_token_bytes, weights_source=w.source, vision_bytes=w.vision_bytes,
              kv_bytes_per_token=round(kv_card, 1), kv_layers=kv.kinds, state_bytes_per_sequence=state_card,
              kv_tokens=kv_tokens, concurrency=round(concurrency, 2),
              decode_tok_s=round(short.tok_s, 1) if fits else None,
              decode_tok_s_at_context=round(at_context.tok_s, 1) if fits else None, decode=decode,
              speed_source=speed_source, bandwidth_gbps=bw, bandwidth_source=bandwidth_source, blockers=blockers,
              warnings=warnings,
              serve_args=args, env=env, notes=notes, arithmetic=arithmetic,
              calibration=[j.to_json() for j in calibration.points] if calibration else [])
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
