"""The memory vLLM keeps out of the KV cache, term by term, as vLLM-Ascend 0.23 measures it at start-up.

vllm_ascend/worker/worker.py determine_available_memory: KV = total x utilisation - (weights + the torch peak of
profile_run + non-torch memory). Graph capture comes after the KV cache is allocated, so its pool is not in that
sum: it has to fit in the (1 - utilisation) left over. profile_run (vllm/v1/worker/gpu_model_runner.py) runs, in
turn: the multimodal encoder on its largest item (its outputs kept in the encoder cache), the model on
max_num_batched_tokens tokens, then the logits of max_num_seqs rows over the vocabulary (vllm-ascend overrides
_dummy_sampler_run to compute_logits only, "TODO: need to rum a dummy sampler": 0.9.0rc2 to 0.23.0 alike, so no
sampler tensors are profiled). The peak is the largest of those phases, each counted from the tensors alive at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ascend_setup.fit.config import text_config
from ascend_setup.fit.kv_cache import head_dim
from ascend_setup.fit.model_files import experts_of

GIB = 1024 ** 3
MIB = 1024 ** 2
#: vLLM's defaults for `vllm serve` on a card under 70 GiB (vllm/engine/arg_utils.py
#: _set_default_max_num_seqs_and_batched_tokens_args, OPENAI_API_SERVER); the LLM class uses 8192 tokens.
SERVE_BATCHED_TOKENS, SERVE_MAX_SEQS = 2048, 256
#: Non-torch memory at TP 1 (the NPU runtime's own): 0.03 GiB printed by vLLM-Ascend's start-up summary
#: ("0.03 GiB for non-torch memory", vllm-ascend PR #9606's log, Qwen3-0.6B on one card).
NON_TORCH_TP1 = int(0.03 * GIB)
#: CANN's HCCL_BUFFSIZE default (200 MB), allocated twice (input and output) per communicator a rank joins
#: (CANN environment-variable reference, HCCL_BUFFSIZE).
HCCL_BUFFER = 2 * 200 * MIB
#: The logits phase of profile_run (vllm_ascend/worker/model_runner_v1.py _dummy_sampler_run, 0.23.0; the same
#: lines inline in 0.11.0rc3's profile_run): hidden_states[logit_indices], one row per request, then
#: model.compute_logits: lm_head's local vocab slice in the model dtype and, at TP > 1, the gathered full vocabulary
#: (vllm/model_executor/layers/logits_processor.py _get_logits, _gather_logits), with the forward's hidden states
#: still alive. No float32 copy, softmax or top-k/top-p: the sampler itself is not run.
#: The largest image the Qwen-VL processors accept by default: 65,536 patches (Qwen2.5-VL 12,845,056 pixels at
#: patch 14, Qwen3-VL 16,777,216 at patch 16; preprocessor_config.json max_pixels / longest_edge), which vLLM
#: profiles the encoder with (get_mm_max_tokens_per_item), capped at max_model_len after merging.
MAX_IMAGE_PATCHES = 65536
VISION_PAD_FROM, VISION_PAD_TO = 64, 128
#: The vllm-ascend release whose start-up accounting fit follows by default (the matrix's).
VLLM_ASCEND_DEFAULT = (0, 23)
#: The last release that sized the KV cache from the device's whole use: worker_v1.py / worker.py
#: determine_available_memory from 0.9.0rc2 to 0.14.0rc1 subtracts torch's absolute allocated peak plus
#: non_torch_allocations = (total - free) - torch allocated, so everything on the device that torch does not hold
#: counts, what was there before vLLM started included. From 0.15.0rc1 on (0.16, 0.18, 0.23 alike) it is vLLM's
#: memory_profiling against the snapshot taken when the worker starts: only the increases since then count.
ABSOLUTE_ACCOUNTING_UNTIL = (0, 14)
#: What the device already holds when the worker starts (the runtime's context and what the idle device keeps):
#: 61.27 - 60.89 GiB in vllm-ascend PR #9606's start-up line "Free memory on device (60.89/61.27 GiB) on startup".
#: The releases up to ABSOLUTE_ACCOUNTING_UNTIL count it; later ones do not.
IN_USE_AT_STARTUP = int((61.27 - 60.89) * GIB)


@dataclass
class Term:
    name: str
    bytes: int
    source: str
    in_budget: bool = True  # subtracted before the KV cache (False: must fit in the headroom)


@dataclass
class Serving:
    """The serve flags that change the memory vLLM profiles."""

    max_num_batched_tokens: int = SERVE_BATCHED_TOKENS
    max_num_seqs: int = SERVE_MAX_SEQS
    enforce_eager: bool = False
    vllm_ascend: Tuple[int, int] = VLLM_ASCEND_DEFAULT  # the release whose accounting applies (major, minor)

    @property
    def absolute_accounting(self) -> bool:
        return self.vllm_ascend <= ABSOLUTE_ACCOUNTING_UNTIL


def _first(value: Any) -> int:
    """A per-layer list's largest entry (Hunyuan's moe_intermediate_size), or the value."""
    return int(max(value)) if isinstance(value, list) else int(value or 0)


def text_peak(cfg: Dict[str, Any], tokens: int, tp: int, dtype: int) -> tuple:
    """(bytes, phase): the largest set of tensors alive at once in one layer at `tokens` tokens, per card: the
    hidden state and residual, plus the attention's q/k/v and output, or the MLP's gate_up output and its
    activation, or a MoE layer's tokens copied to each of their top-k experts with the experts' intermediate."""
    h = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    hd = head_dim(cfg)
    base = 2 * h
    attention = base + (heads + 2 * kv) * hd // tp + heads * hd // tp
    mlp = base + 3 * _first(cfg.get("intermediate_size") or 4 * h) // tp
    experts, topk = experts_of(cfg)
    moe = 0
    if experts and topk:
        inter = _first(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 4 * h)
        moe = base + topk * (2 * h + 3 * inter // tp)
    widest = max(attention, mlp, moe)
    phase = "MoE dispatch" if widest == moe else "MLP" if widest == mlp else "attention"
    return tokens * widest * dtype, phase


def padded_head(head: int) -> int:
    """vllm_ascend/ops/mm_encoder_attention.py: a vision head between 64 and 128 wide is padded to 128."""
    return VISION_PAD_TO if VISION_PAD_FROM < head < VISION_PAD_TO else head


def vision_peak(config: Dict[str, Any], max_model_len: int, dtype: int, tp: int = 1) -> tuple:
    """(encoder phase peak, held through the text phases, patches): a Qwen-VL style vision tower on its largest
    image, counted from the tensors alive at once in vLLM 0.23.0 and vllm-ascend 0.23.0 (eager: neither
    compile_mm_encoder nor cudagraph_mm_encoder is on by default, vllm/config/compilation.py); (0, 0, 0) without
    a vision_config. Per patch, in the model dtype:

    - held through the whole encoder: the dummy pixels (already in the model dtype: vllm/multimodal/processing/
      context.py _postprocess_output; profile_run keeps batched_dummy_mm_inputs until it returns), the
      interpolated position embeddings (qwen3_vl.py prepare_encoder_metadata keeps pos_embeds in encoder_metadata
      for the whole forward) and, from the layer that makes them, the deepstack features (deepstack_feature_lists:
      out_hidden_size per merged token each, until the final torch.cat);
    - the wider of a block's two halves. Attention (qwen2_5_vl.py Qwen2_5_VisionAttention.forward, with
      vllm_ascend/ops/mm_encoder_attention.py _forward_eager_fia): the block input and norm1's output, the qkv
      output, the contiguous q/k copy and its rotated copy (AscendApplyRotaryEmb: npu_rotary_mul), q, k and v
      padded to head 128 and the fused-infer-attention output of that width (a flash kernel: no seq x seq
      matrix), and the output made contiguous again while those are alive. MLP (qwen3_vl.py Qwen3_VisionBlock):
      the block input, the residual sum, norm2's output, fc1's output and its activation, fc2's output;
    - or the end: the merger's output and the outputs concatenated, beside the last hidden state.

    At TP > 1 the tower's qkv, heads and MLP are split (ColumnParallelLinear), the hidden states are not."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict) or not vc.get("hidden_size"):
        return 0, 0, 0
    merge = int(vc.get("spatial_merge_size") or 2) ** 2
    patches = min(MAX_IMAGE_PATCHES, max_model_len * merge)
    h = int(vc["hidden_size"])
    heads = int(vc.get("num_heads") or vc.get("num_attention_heads") or 16)
    inter = int(vc.get("intermediate_size") or 4 * h)
    depth = int(vc.get("depth") or vc.get("num_hidden_layers") or 0)
    pixels = (int(vc.get("in_channels") or 3) * int(vc.get("temporal_patch_size") or 1)
              * int(vc.get("patch_size") or 14) ** 2)
    out = int(vc.get("out_hidden_size") or text_config(config)["hidden_size"])
    deepstack = vc.get("deepstack_visual_indexes") or []
    stacked = sum(1 for i in deepstack if i < depth - 1) * out // merge  # made before the last block runs
    attention = 2 * h + (3 * h + 2 * h + 2 * h + h) // tp + 4 * (heads // tp) * padded_head(h // heads)
    mlp = 3 * h + 2 * inter // tp + h
    end = h + (out + 2 * (1 + len(deepstack)) * out) // merge
    peak = pixels + h + max(stacked + max(attention, mlp), end)
    outputs = patches // merge * out * (1 + len(deepstack))
    return patches * peak * dtype, outputs + patches * pixels * dtype, patches


def non_kv_terms(config: Dict[str, Any], *, tp: int, weights_card: int, weights_source: str, dtype: int,
                 max_model_len: int, serving: Serving, moe: bool) -> List[Term]:
    """Every term vLLM subtracts before sizing the KV cache on one card, and the graph pool it does not."""
    cfg = text_config(config)
    tokens = serving.max_num_batched_tokens  # profile_run's dummy batch: max_num_tokens
    forward, phase = text_peak(cfg, tokens, tp, dtype)
    vocab = int(cfg.get("vocab_size") or 32000)
    hidden = int(cfg["hidden_size"])
    rows = min(serving.max_num_seqs, tokens)
    logits = (tokens + rows) * hidden * dtype + rows * vocab * dtype * (1 + (1 / tp if tp > 1 else 0))
    encoder, kept, patches = vision_peak(config, max_model_len, dtype, tp)
    phases = {f"the forward pass at {tokens:,} tokens ({phase})": kept + forward,
              f"the logits of {rows} rows over {vocab:,} tokens": kept + int(logits)}
    held = {}
    if encoder:
        vision = f"the vision encoder on its largest image ({patches:,} patches)"
        phases[vision] = encoder
        held = {k: f", with {kept / GIB:.2f} GiB of encoder outputs and dummy pixels kept" for k in phases}
        held[vision] = ", its pixels, position embeddings and deepstack features held (block attention, q/k/v padded)"
    worst = max(phases, key=lambda k: phases[k])
    terms = [
        Term("weights", weights_card, weights_source + (f", 1/{tp} per card" if tp > 1 else "")),
        Term("profiling peak", phases[worst], f"profile_run's largest phase: {worst}" + held.get(worst, "")),
        Term("non-torch", NON_TORCH_TP1, "the NPU runtime's own (0.03 GiB in vllm-ascend #9606's start-up summary)"),
    ]
    if serving.absolute_accounting:
        version = ".".join(map(str, serving.vllm_ascend))
        terms.append(Term("in use at start-up", IN_USE_AT_STARTUP,
                          f"vllm-ascend {version} counts the whole device's non-torch memory (worker "
                          "determine_available_memory up to 0.14: non_torch_allocations), what the device held "
                          "before vLLM started included: 61.27 - 60.89 GiB in vllm-ascend #9606's start-up line"))
    if tp > 1:
        communicators = 2 if moe else 1
        terms.append(Term("TP buffers", communicators * HCCL_BUFFER,
                          f"HCCL: 2 x HCCL_BUFFSIZE (200 MB default) per communicator, {communicators} "
                          + ("(the TP group and the MoE dispatch group)" if moe else "(the TP group)")))
    terms.append(Term("graph pool", 0, "none: --enforce-eager" if serving.enforce_eager else
                      "captured after the KV cache is sized (not in its budget): 0.09-0.46 GiB published "
                      "(vllm-ascend #9606, #4594, the field report); it must fit in the (1 - utilisation) left over",
                      in_budget=False))
    return terms


def budgeted(terms: List[Term]) -> int:
    return sum(t.bytes for t in terms if t.in_budget)
