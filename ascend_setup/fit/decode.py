"""The decode-speed model: time per token = t_fixed + bytes read per token / (eta x bandwidth).

Why two terms: the field report's single factor (0.65 of peak) was fitted on the whole weights. Counting only the
bytes a token really reads moved both of its measurements 8-9% away, in opposite directions; and public data shows
a per-token floor (kernel launches, sampling, the scheduler) whatever the model's size (research/serve.md §4). A
line through (bytes, seconds) holds both: its slope is 1 / (eta x bandwidth), its intercept t_fixed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Sequence, Tuple

from ascend_setup.fit.config import text_config
from ascend_setup.fit.model_files import ModelFiles, kv_layout, weights

KV_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "int8": 1}


@dataclass(frozen=True)
class Terms:
    eta: float  # the share of peak bandwidth a token's bytes stream at
    t_fixed_s: float  # the per-token cost that does not grow with the bytes


@dataclass(frozen=True)
class Prediction:
    bytes_per_token: float
    fixed_s: float
    bandwidth_s: float

    @property
    def seconds(self) -> float:
        return self.fixed_s + self.bandwidth_s

    @property
    def tok_s(self) -> float:
        return 1.0 / self.seconds

    @property
    def bound(self) -> str:
        """'launch' when the fixed cost is most of a token's time: more bandwidth or more cards barely help."""
        return "launch" if self.fixed_s >= self.bandwidth_s else "bandwidth"


def predict(terms: Terms, bytes_per_token: float, bandwidth_gbps: float) -> Prediction:
    return Prediction(bytes_per_token, terms.t_fixed_s, bytes_per_token / (terms.eta * bandwidth_gbps * 1e9))


def solve(samples: Sequence[Tuple[float, float]], bandwidth_gbps: float) -> Terms:
    """Both terms by least squares from (bytes per token, tok/s) samples of at least two sizes: seconds per
    token against bytes is a line, slope 1 / (eta x bandwidth), intercept t_fixed."""
    xs, ys = [b for b, _ in samples], [1.0 / t for _, t in samples]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread <= 0:
        raise ValueError("solve needs samples of at least two sizes")
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
    return Terms(eta=1.0 / (slope * bandwidth_gbps * 1e9), t_fixed_s=mean_y - slope * mean_x)


def adjust_eta(terms: Terms, samples: Sequence[Tuple[float, float]], bandwidth_gbps: float) -> Terms:
    """eta alone by least squares, t_fixed kept: what samples of one size can say (they cannot split the terms).
    Each sample must be slower than t_fixed alone."""
    rest = [(b, 1.0 / t - terms.t_fixed_s) for b, t in samples]
    slope = sum(b * r for b, r in rest) / sum(b * b for b, _ in rest)
    return Terms(eta=1.0 / (slope * bandwidth_gbps * 1e9), t_fixed_s=terms.t_fixed_s)


def kv_share(config: Dict[str, Any], tp: int) -> float:
    """The share of a token's KV one card holds: KV heads split over the cards (replicated when there are
    fewer heads than cards); an MLA latent is whole on every card."""
    cfg = text_config(config)
    if tp == 1 or cfg.get("kv_lora_rank"):
        return 1.0
    heads = int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    return max(1.0 / tp, 1.0 / heads)


def bytes_per_token(files: ModelFiles, *, context: int, kv_dtype: str = "bf16", tp: int = 1) -> float:
    """The bytes one card reads to decode the token at position `context`: the weights a token uses (active
    experts only, no vision tower, one input-embedding row, quantised tensors at their stored width with their
    scales), the KV of every earlier token in the attention layers, and the fixed recurrent state of linear
    attention / Mamba layers (read and written every token)."""
    kv = kv_layout(files.config, context, KV_DTYPE_BYTES[kv_dtype])
    return (
        weights(files).per_token_bytes / tp
        + kv.per_token_bytes * kv_share(files.config, tp) * context
        + kv.state_bytes_per_sequence / tp
    )
