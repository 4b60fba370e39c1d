"""Will a model fit a card, and how fast will it decode, with the arithmetic kept so a person can check it.

- Decode: time per token = t_fixed + bytes read per token / (eta x bandwidth) (fit/decode.py), the terms the
  card's (fitted on the field report's two measurements) or this host's (fit/calibration.py). Given at a short
  context (the measurements') and at the end of a --context-long sequence, whose KV every token reads.
- KV: (device-visible memory x utilisation - weights - profiling peak - non-torch - TP buffers), term by term as
  vLLM-Ascend 0.23 measures it (fit/profile.py), laid out in blocks as vLLM's KV cache manager does (fit/kv_cache.py),
  per card under --tp; stated with its lower bound, the estimate less the worst over-estimate measured on published
  start-up lines (KV_MARGIN).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.errors import BadInput
from ascend_setup.fit.calibration import Calibration
from ascend_setup.fit.cards import Card
from ascend_setup.fit.config import text_config
from ascend_setup.fit.decode import KV_DTYPE_BYTES, Prediction, bytes_per_token, kv_share, predict
from ascend_setup.fit.kv_cache import KvPool, plan_pool
from ascend_setup.fit.model_files import ModelFiles, dtype_bytes, experts_of, kv_layout, layer_kinds, weights
from ascend_setup.fit.profile import Serving, Term, budgeted, in_use_at_start, non_kv_terms
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.serve_hints import merged_serve_args
from ascend_setup.utils.inputs import load_json

GIB = 1024**3
#: The KV figure's safety margin, derived from the spread of fit's error over every published KV and concurrency
#: line of ../shared/fit-referee: the largest over-estimate, rounded up to a whole percent, so the lower bound
#: (the estimate / (1 + KV_MARGIN)) is under every one of them. Measured by tests/functional/test_fit_referee.py
#: (test_the_margin_is_the_worst_over_estimate): +16.4% (vllm-ascend #2473, Qwen3-30B-A3B W8A8 at TP8, whose
#: serve flags, utilisation and weights the log does not show: run at vLLM's default 0.9), then +0.5% (the field
#: report), +0.1%, 0.0%; the rest are under.
KV_MARGIN = 0.17
#: What --tp assumes of the per-layer all-reduces: stated in every result that uses it.
TP_ASSUMPTION = (
    "--tp {tp}: weights and KV split over {tp} cards, HCCL buffers on each; the "
    "all-reduces (2 per layer over HCCS) are counted only in the multi-card fixed cost ({fixed:g} ms: "
    "{source}), so the decode figure is an upper bound"
)


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
    kv_tokens: int  # "GPU KV cache size" as vLLM 0.23 prints it: int(concurrency x context)
    concurrency: float
    kv_tokens_low: int  # the same with the margin: what a start-up should not fall below
    concurrency_low: float
    kv_block_tokens: int  # blocks per group x block size: what vLLM before 0.23 printed as the KV cache size
    kv_available_bytes: int  # per card, for the KV cache (the estimate)
    kv_available_low_bytes: int  # the same, less the margin
    kv_pool: KvPool
    memory_terms: List[Term]
    device_memory_bytes: int
    device_memory_source: str
    decode_tok_s: Optional[float]  # None when the model does not fit: no speed for what cannot run
    decode_tok_s_at_context: Optional[float]  # at the end of a --context-long sequence (its KV read every token)
    decode_tok_s_eager: Optional[float]  # the same model under --enforce-eager (the card's eager fixed cost)
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


#: What vllm-ascend 0.23.0's FP8 scheme reads from the model's config (`ops/linear.py`, the ds_linear path every
#: FP8 linear layer takes): only DeepSeek-V4's configs carry both, so a DeepSeek-V3/R1 FP8 checkpoint fails at
#: load as a Qwen one does (vllm-ascend#14467).
FP8_CONFIG_FIELDS = ("o_groups", "o_lora_rank")


def blockers_and_hints(files: ModelFiles, row: Row) -> Tuple[List[str], List[str], Dict[str, str], List[str]]:
    """(blockers, serve args, env, notes) that apply to this model on this row (from the row's hints)."""
    config = files.config
    cfg = text_config(config)
    hints = {h.id: h for h in row.hints()}
    model_type = str(config.get("model_type", cfg.get("model_type", ""))).lower()
    blockers, args, notes = [], [], []
    env: Dict[str, str] = {}
    given = config.get("quantization_config")
    quant = given if isinstance(given, dict) else {}
    missing = [f for f in FP8_CONFIG_FIELDS if f not in cfg and f not in config]
    if str(quant.get("quant_method", "")).lower() == "fp8" and missing:
        blockers.append(
            f"FP8 checkpoint of a {model_type or 'model'} whose config lacks {', '.join(missing)}: "
            f"vllm-ascend {row.packages['vllm-ascend']}'s FP8 path maps every linear layer to DeepSeek's "
            "ds_linear, which reads them ('...Config' object has no attribute 'o_groups'); use a "
            "ModelSlim W8A8 checkpoint instead"
        )
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
        raise BadInput(
            f"--tp {tp} does not divide the model's {heads} attention heads",
            hint="vLLM needs num_attention_heads divisible by the tensor-parallel size",
        )


def _decode_line(at: int, per: str, p: Prediction, terms_eta: float, bw: float) -> str:
    return (
        f"decode at {at:,} tokens{per}: {p.fixed_s * 1000:.2f} ms fixed + {p.bytes_per_token / 1e9:.2f} GB / "
        f"({terms_eta:.3f} x {bw:g} GB/s) = {p.fixed_s * 1000:.2f} + {p.bandwidth_s * 1000:.2f} = "
        f"{p.seconds * 1000:.2f} ms per token -> {p.tok_s:.1f} tok/s ({p.bound}-bound)"
    )


def _decode_json(p: Prediction) -> Dict[str, Any]:
    return {
        "bytes_per_token": round(p.bytes_per_token),
        "fixed_ms": round(p.fixed_s * 1000, 3),
        "bandwidth_ms": round(p.bandwidth_s * 1000, 3),
        "tok_s": round(p.tok_s, 1),
        "bound": p.bound,
    }


def estimate(
    files: ModelFiles,
    card: Card,
    row: Row,
    *,
    context: int,
    utilisation: float,
    kv_dtype: str,
    bandwidth: Optional[float] = None,
    bandwidth_source: str = "card-table",
    tp: int = 1,
    calibration: Optional[Calibration] = None,
    serving: Optional[Serving] = None,
) -> Fit:
    """The fit; `calibration` (this host's terms) replaces the card's decode terms when given."""
    config = files.config
    check_tp(config, tp)
    serving = serving or Serving()
    w = weights(files)
    cfg = text_config(config)
    kinds = layer_kinds(cfg)
    kv = kv_layout(config, context, KV_DTYPE_BYTES[kv_dtype])
    share = kv_share(config, tp)
    kv_card = kv.per_token_bytes * share
    state_card = int(kv.state_bytes_per_sequence / tp)
    try:
        pool = plan_pool(config, kinds, tp, KV_DTYPE_BYTES[kv_dtype], dtype_bytes(cfg), serving.vllm_ascend)
    except ValueError as exc:
        raise BadInput(
            f"{files.name}: no estimate: {exc} (linear_num_value_heads, linear_key_head_dim, ... or mamba_d_state)",
            hint="give the model's full config.json",
        ) from None
    bw = bandwidth if bandwidth is not None else card.peak_gbps
    weights_card = math.ceil(w.total_bytes / tp)
    experts, _ = experts_of(cfg)
    in_use = in_use_at_start(card, tp, serving)
    memory = non_kv_terms(
        config,
        tp=tp,
        weights_card=weights_card,
        weights_source=w.source,
        dtype=dtype_bytes(cfg),
        max_model_len=context,
        serving=serving,
        moe=bool(experts),
        in_use=in_use,
        linear_bytes={"W8": 1, "W4": 0.5}.get(files.quant_type.upper()[:2], 0),
    )
    requested = math.ceil(card.visible_bytes * utilisation)
    available = requested - budgeted(memory)
    low = int(available / (1 + KV_MARGIN))
    fits = available > 0
    kv_tokens = pool.printed_tokens(available, context) if fits else 0
    concurrency = pool.concurrency(available, context) if fits else 0.0
    eager_terms = card.decode.eager_terms(tp)
    # this host's measurements are graph-mode ones (calibration.py keeps eager points out): eager has its own term
    if serving.enforce_eager:
        calibration = None
    terms = eager_terms if serving.enforce_eager else calibration.terms if calibration else card.decode.terms(tp)
    speed_source = (
        calibration.source
        if calibration
        else (
            f"the card's decode model ({card.decode_name}: {card.decode.source})"
            + (f"; eager: {card.decode.eager_source}" if serving.enforce_eager else "")
        )
    )
    short_context = min(context, card.decode.context)
    short, at_context = (
        predict(terms, bytes_per_token(files, context=c, kv_dtype=kv_dtype, tp=tp), bw)
        for c in (short_context, context)
    )
    eager = predict(eager_terms, short.bytes_per_token, bw)
    blockers, args, env, notes = blockers_and_hints(files, row)
    warnings = []
    if not fits:
        blockers.insert(
            0,
            f"the weights ({weights_card / GIB:.1f} GiB per card) and the memory vLLM profiles "
            f"({(budgeted(memory) - weights_card) / GIB:.2f} GiB) do not fit "
            f"{card.visible_bytes / GIB:.2f} GiB x {utilisation:g}"
            + ("" if tp > 1 else "; try --tp N over several cards, or a quantised checkpoint"),
        )
    refusal = start_refusal(card, utilisation, serving, in_use)
    if refusal:
        blockers.insert(0, refusal)
    max_pos = text_config(config).get("max_position_embeddings")
    if max_pos and context > max_pos:
        warnings.append(
            f"--context {context:,} is above the model's max_position_embeddings {max_pos:,}: vLLM "
            "refuses a longer --max-model-len unless the rope is scaled; concurrency is counted as given"
        )
    if w.note:
        notes.insert(0, w.note.lstrip("; "))
    if tp > 1:
        notes.insert(
            0,
            TP_ASSUMPTION.format(
                tp=tp,
                fixed=terms.t_fixed_s * 1000,
                source="this host's measurements" if calibration else card.decode.multi_card_source,
            ),
        )
    if fits and short.bound == "launch":
        notes.insert(
            0,
            f"launch-bound, not bandwidth-bound: the fixed {short.fixed_s * 1000:.2f} ms per token is "
            f"most of its {short.seconds * 1000:.2f} ms"
            + (f" at TP {tp}: more cards do not make it faster" if tp > 1 else "")
            + "; more bandwidth barely helps",
        )
    for judged in calibration.points if calibration else []:
        if not judged.used:
            notes.append(
                f"host measurement not used: {judged.point.model} at {judged.point.tok_s:.1f} tok/s "
                f"({judged.point.measured_at}): {judged.why}"
            )
    per = " per card" if tp > 1 else ""
    arithmetic = [
        f"weights: {w.total_bytes / GIB:.2f} GiB ({w.source}, {w.dtype}"
        + (f", vision tower {w.vision_bytes / GIB:.2f} GiB resident" if w.vision_bytes else "")
        + f"); read per token: {w.per_token_bytes / GIB:.2f} GiB"
        + (f"; {weights_card / GIB:.2f} GiB per card" if tp > 1 else ""),
        f"KV per token{per}: {kv_card / 1024:.1f} KiB ({kv.full_layers} full-attention, {kv.sliding_layers} "
        f"sliding, {kv.state_layers} fixed-state layers; {kv_dtype})"
        + (f"; fixed state {state_card / 2**20:.1f} MiB per sequence" if kv.state_layers else ""),
        f"device memory{per}: {card.visible_bytes / GIB:.2f} GiB visible ({card.visible_source}) x {utilisation:g} = "
        f"{requested / GIB:.2f} GiB",
        *(f"  - {t.name}: {t.bytes / GIB:.2f} GiB ({t.source})" for t in memory if t.in_budget),
        f"  = KV cache {available / GIB:.2f} GiB{per}; at least {low / GIB:.2f} GiB (less the {KV_MARGIN:.0%} "
        "margin: the worst over-estimate on published start-up lines)",
        *(f"  not in the budget: {t.name} ({t.source})" for t in memory if not t.in_budget),
        f"KV blocks: {pool.layout}; {pool.num_blocks(available):,} blocks, {pool.blocks_per_request(context)} per "
        f"request of {context:,} tokens -> {kv_tokens:,} tokens (vLLM 0.23 prints concurrency x context), at least "
        f"{pool.printed_tokens(low, context) if fits else 0:,}",
        f"concurrency at {context:,} tokens: {concurrency:.2f} sequences, at least "
        f"{pool.concurrency(low, context) if fits else 0.0:.2f}",
    ]
    if fits:
        arithmetic += [
            f"decode: time per token = t_fixed + bytes per token / (eta x bandwidth); eta {terms.eta:.3f}, "
            f"t_fixed {terms.t_fixed_s * 1000:.2f} ms",
            _decode_line(short_context, per, short, terms.eta, bw),
        ]
        if context != short_context:
            arithmetic.append(_decode_line(context, per, at_context, terms.eta, bw))
        arithmetic.append(
            f"eager (--enforce-eager): t_fixed {eager_terms.t_fixed_s * 1000:.2f} ms -> "
            f"{eager.tok_s:.1f} tok/s at {short_context:,} tokens ({card.decode.eager_source}); "
            "a measured speed near it points to eager mode"
        )
    else:
        arithmetic.append("decode: not estimated, the model does not fit")
    decode = {
        "eta": round(terms.eta, 4),
        "t_fixed_ms": round(terms.t_fixed_s * 1000, 3),
        "method": calibration.method if calibration else "card",
        "context": short_context,
        **_decode_json(short),
        "at_context": {"context": context, **_decode_json(at_context)},
    }
    fit = Fit(
        model=files.name,
        origin=files.origin,
        card=card.name,
        card_source=card.source,
        tp=tp,
        fits=fits,
        headline="",
        weights_bytes=w.total_bytes,
        weights_per_card_bytes=weights_card,
        weights_read_per_token=w.per_token_bytes,
        weights_source=w.source,
        vision_bytes=w.vision_bytes,
        kv_bytes_per_token=round(kv_card, 1),
        kv_layers=kv.kinds,
        state_bytes_per_sequence=state_card,
        kv_tokens=kv_tokens,
        concurrency=round(concurrency, 2),
        kv_tokens_low=pool.printed_tokens(low, context) if fits else 0,
        concurrency_low=round(pool.concurrency(low, context), 2) if fits else 0.0,
        kv_block_tokens=pool.block_tokens(available) if fits else 0,
        kv_available_bytes=max(0, available),
        kv_available_low_bytes=max(0, low),
        kv_pool=pool,
        memory_terms=memory,
        device_memory_bytes=card.visible_bytes,
        device_memory_source=card.visible_source,
        decode_tok_s=round(short.tok_s, 1) if fits else None,
        decode_tok_s_at_context=round(at_context.tok_s, 1) if fits else None,
        decode_tok_s_eager=round(eager.tok_s, 1) if fits else None,
        decode=decode,
        speed_source=speed_source,
        bandwidth_gbps=bw,
        bandwidth_source=bandwidth_source,
        blockers=blockers,
        warnings=warnings,
        serve_args=args,
        env=env,
        notes=notes,
        arithmetic=arithmetic,
        calibration=[j.to_json() for j in calibration.points] if calibration else [],
    )
    fit.headline = headline(fit, context)
    return fit


def start_refusal(card: Card, utilisation: float, serving: Serving, in_use: Term) -> Optional[str]:
    """vLLM-Ascend from 0.15 refuses to start when utilisation x total is more than what is free when the worker
    starts (worker.py init_device, `in_use` taken then); the highest utilisation that starts, rounded down to a
    hundredth, when so."""
    if serving.absolute_accounting:
        return None
    free = card.visible_bytes - in_use.bytes
    if card.visible_bytes * utilisation <= free:
        return None
    highest = math.floor(free / card.visible_bytes * 100) / 100
    return (
        f"vLLM refuses to start at --gpu-memory-utilization {utilisation:g}: {utilisation:g} x "
        f"{card.visible_bytes / GIB:.2f} GiB is more than the {free / GIB:.2f} GiB free when a worker starts "
        f"({in_use.bytes / GIB:.2f} GiB already in use: {in_use.source}); {highest:.2f} or less starts"
    )


def headline(fit: Fit, context: int) -> str:
    """One line that agrees with the figures: no speed for a model that does not fit, the blocker first."""
    where = f"{fit.model} on " + (f"{fit.tp} x " if fit.tp > 1 else "an ") + f"Ascend {fit.card}"
    if not fit.fits:
        return f"{where}: does not fit ({fit.blockers[0]})"
    figures = (
        f"{fit.kv_tokens:,} KV tokens (at least {fit.kv_tokens_low:,}), {fit.concurrency:.2f} sequences of "
        f"{context:,} (at least {fit.concurrency_low:.2f}), about "
        f"{fit.decode_tok_s:.0f} tok/s single-stream"
    )
    if fit.blockers:
        return f"{where}: fits but will not load ({fit.blockers[0].split(':')[0]}); if it did: {figures}"
    return f"{where}: {figures}"


def _probe(workdir: Path) -> Optional[Dict[str, Any]]:
    """`ascend-setup probe`'s result on an NPU here (<workdir>/probe.json), if any."""
    path = workdir / "probe.json"
    if not path.exists():
        return None
    data = load_json(path, "probe", follow=False)
    if not isinstance(data, dict) or not str(data.get("device", "")).startswith("npu"):
        return None
    return data


def _positive(data: Dict[str, Any], key: str, what: str, path: Path) -> Optional[float]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise BadInput(
            f"probe result {path}: {key} {str(value)[:20]} is not {what}",
            hint="run 'ascend-setup probe' again, or pass --bandwidth",
        )
    return float(value)


def probed_bandwidth(workdir: Path) -> Optional[float]:
    """The bandwidth `ascend-setup probe` measured on an NPU here, if any; a figure that is not a bandwidth
    (-5, nan) is bad input, not a speed."""
    data = _probe(workdir)
    if data is None:
        return None
    gbps = _positive(data, "gbps", "a bandwidth", workdir / "probe.json")
    if gbps is None:
        raise BadInput(
            f"probe result {workdir / 'probe.json'}: gbps None is not a bandwidth",
            hint="run 'ascend-setup probe' again, or pass --bandwidth",
        )
    return gbps


def probed_memory(workdir: Path) -> Optional[int]:
    """The device-visible memory torch_npu reported on this host's NPU (probe.json's total_memory), if recorded:
    fit prefers it to the card table's published figure."""
    data = _probe(workdir)
    total = _positive(data, "total_memory", "a memory size in bytes", workdir / "probe.json") if data else None
    return int(total) if total else None


def probed_in_use(workdir: Path, total: int) -> Optional[int]:
    """What a new process found in use on this host's NPU when `probe` started (probe.json's in_use_memory), if
    recorded: its context and the card's idle use, which fit prefers to the card table's figures."""
    data = _probe(workdir)
    value = data.get("in_use_memory") if data else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < total:
        raise BadInput(
            f"probe result {workdir / 'probe.json'}: in_use_memory {str(value)[:20]} is not a memory size in "
            f"bytes under its total_memory ({total})",
            hint="run 'ascend-setup probe' again",
        )
    return int(value)
