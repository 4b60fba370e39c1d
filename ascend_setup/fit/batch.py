"""The decode model extended to a batch (issue 51): one decode step gives every running sequence one token, and
reads the weights once, the KV of every sequence, and pays the fixed cost once:

    step = t_fixed + (weights read per token + c x KV and state of one sequence) / (eta x bandwidth)

so TPOT (each user's time per token) is the step, and decode throughput is c / step. At c = 1 this is the
single-stream two-term model of fit/decode.py exactly (bytes_per_token = the weights a token reads + one
sequence's KV and state): no constant is refitted here. The terms are the card's (data/cards.yaml, a2-graph:
fitted on the field report's two single-stream measurements) or this host's calibration, as fit uses them.

What it leaves out, said so: compute (at a large batch a step's matmuls stop being free: the model is an upper
bound on throughput there), prefill interleaved with decode (TTFT is not predicted), and a per-sequence fixed
cost (sampling, the scheduler) that grows with the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from ascend_setup.fit.decode import Terms, bytes_per_token
from ascend_setup.fit.model_files import ModelFiles, weights


@dataclass(frozen=True)
class Step:
    concurrency: int
    fixed_s: float  # t_fixed, once a step
    weights_s: float  # the weights a token reads, read once a step for the whole batch
    kv_s: float  # the KV (and recurrent state) of every sequence in the batch

    @property
    def seconds(self) -> float:
        return self.fixed_s + self.weights_s + self.kv_s

    @property
    def tpot_ms(self) -> float:
        return self.seconds * 1000

    @property
    def per_user_tok_s(self) -> float:
        return 1.0 / self.seconds

    @property
    def throughput_tok_s(self) -> float:
        """Decode throughput of the batch: c tokens a step (prefill not counted)."""
        return self.concurrency / self.seconds

    def to_json(self) -> Dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "tpot_ms": round(self.tpot_ms, 3),
            "fixed_ms": round(self.fixed_s * 1000, 3),
            "weights_ms": round(self.weights_s * 1000, 3),
            "kv_ms": round(self.kv_s * 1000, 3),
            "per_user_tok_s": round(self.per_user_tok_s, 2),
            "throughput_tok_s": round(self.throughput_tok_s, 2),
        }


def step_of(
    terms: Terms, shared_bytes: float, per_sequence_bytes: float, bandwidth_gbps: float, concurrency: int
) -> Step:
    """The step from its bytes: `shared_bytes` read once a step (the weights), `per_sequence_bytes` per sequence."""
    if concurrency < 1:
        raise ValueError("a batch has at least one sequence")
    rate = terms.eta * bandwidth_gbps * 1e9
    return Step(concurrency, terms.t_fixed_s, shared_bytes / rate, concurrency * per_sequence_bytes / rate)


def step(
    terms: Terms,
    files: ModelFiles,
    *,
    concurrency: int,
    context: int,
    bandwidth_gbps: float,
    kv_dtype: str = "bf16",
    tp: int = 1,
) -> Step:
    """One decode step of `concurrency` sequences, each at `context` tokens (its KV read whole), per card under
    `tp` (fit/decode.py's bytes_per_token split into what the batch shares and what each sequence adds)."""
    shared = weights(files).per_token_bytes / tp
    one = bytes_per_token(files, context=context, kv_dtype=kv_dtype, tp=tp)
    return step_of(terms, shared, one - shared, bandwidth_gbps, concurrency)


def mean_context(input_len: int, output_len: int) -> int:
    """The context a sequence decodes at on average over its output: the prompt and half the output."""
    return input_len + output_len // 2
