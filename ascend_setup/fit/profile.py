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
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.fit.cards import Card
from ascend_setup.fit.config import text_config
from ascend_setup.fit.kv_cache import head_dim
from ascend_setup.fit.model_files import experts_of, layer_kinds

GIB = 1024**3
MIB = 1024**2
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
#: What a worker's own start takes on the device before vLLM measures anything (the runtime's context): 61.27 - 60.89
#: GiB in vllm-ascend PR #9606's start-up line "Free memory on device (60.89/61.27 GiB) on startup". The card's idle
#: use (data/cards.yaml idle_bytes) comes on top: #9606's card (61.27 GiB visible, not a 910B's 60.96) evidently
#: held none of it, for the releases that count the whole device are 0.25-0.30 GiB short of vLLM's own figure
#: without it on every published 910B start-up (vllm-ascend #5044, #4594, #6250, #1189).
WORKER_CONTEXT = int((61.27 - 60.89) * GIB)
#: vllm-ascend 0.13.0rc2 to 0.16.0rc1 import torch_npu._inductor in the worker's __init__ (triton installed, as
#: vllm-ascend requires), before the worker's set_device: every worker of a TP group makes a context on device 0,
#: so rank 0's card holds TP - 1 of them beside its own (read off each sdist's worker.py; 0.13.0rc1 imports it from
#: its triton ops instead, counted with 0.13 as fit names releases by major.minor; 0.17.0rc1 imports it after
#: set_device: vllm-ascend PR #7107, "extra processes on tp rank0 device which consumes extra HBM memory"). Each is
#: 107 MB in npu-smi's process table (VLLMWorker_TP rows on NPU 0 in that PR's thread).
FOREIGN_CONTEXTS = ((0, 13), (0, 16))
FOREIGN_CONTEXT = 107 * MIB
#: torch_npu's caching allocator (torch_npu/csrc/core/npu/NPUCachingAllocator.cpp, Ascend/pytorch v2.5.1-7.0.0 and
#: v2.7.1-7.2.0; master keeps it on 910B/A3 as AddPadSize): round_size adds 32 bytes to every request, then rounds
#: to 512; a request of 10 MiB (kMinLargeAlloc) or more gets a segment of its own rounded up to 2 MiB (kRoundLarge,
#: get_allocation_size); the rest of that segment is split off as a free block when over 1 MiB (should_split,
#: kSmallSize), and empty_cache frees unsplit blocks only (release_blocks). A weight of an exact number of 2 MiB
#: (most are) thus keeps 2 MiB - 512 B reserved and never allocated beside it while it lives.
ALLOC_PAD, ALLOC_ROUND, MIN_LARGE_ALLOC, SEGMENT_ROUND, SPLIT_ABOVE = 32, 512, 10 * MIB, 2 * MIB, MIB
#: The last release whose segments are fixed: vllm-ascend 0.14.0rc1 sets PYTORCH_NPU_ALLOC_CONF=
#: expandable_segments:True by default (platform.py check_and_update_config), where a split's rest stays mapped only
#: up to a page; 0.9.0rc2 to 0.13.0rc2 leave the allocator's default (camem.py only asserts it is not set).
FIXED_SEGMENTS_UNTIL = (0, 13)


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


def in_use_at_start(card: Card, tp: int = 1, serving: Optional[Serving] = None) -> Term:
    """What a vLLM worker finds taken on its card when it starts: this host's probe measurement, else the
    worker's own context and the idle card's use; on rank 0's card, in the releases that made them, the other
    workers' contexts too (vLLM sizes every rank's cache by the smallest). The releases up to 0.14 count it out of
    the KV cache; later ones do not, but refuse to start when utilisation x total is more than the free rest
    (worker.py init_device: "Free memory on device ... on startup is less than desired GPU memory utilization")."""
    if card.in_use_bytes is not None:
        own, source = card.in_use_bytes, card.in_use_source
    else:
        own = WORKER_CONTEXT + card.idle_bytes
        source = (
            f"the worker's own context, 0.38 GiB (61.27 - 60.89 GiB in vllm-ascend #9606's start-up line), and the "
            f"idle card's {card.idle_bytes / GIB:.2f} GiB ({card.idle_source})"
        )
    release = (serving or Serving()).vllm_ascend
    if tp > 1 and FOREIGN_CONTEXTS[0] <= release <= FOREIGN_CONTEXTS[1]:
        own += (tp - 1) * FOREIGN_CONTEXT
        source += (
            f"; on rank 0's card the other {tp - 1} workers' contexts, 107 MB each (vllm-ascend "
            f"{release[0]}.{release[1]} imports torch_npu._inductor before set_device, so each makes one on device 0: "
            "PR #7107)"
        )
    return Term("in use at start-up", own, source)


def _first(value: Any) -> int:
    """A per-layer list's largest entry (Hunyuan's moe_intermediate_size), or the value."""
    return int(max(value)) if isinstance(value, list) else int(value or 0)


def text_peak(cfg: Dict[str, Any], tokens: int, tp: int, dtype: int) -> Tuple[int, str]:
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


def vision_peak(config: Dict[str, Any], max_model_len: int, dtype: int, tp: int = 1) -> Tuple[int, int, int]:
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
    pixels = (
        int(vc.get("in_channels") or 3) * int(vc.get("temporal_patch_size") or 1) * int(vc.get("patch_size") or 14) ** 2
    )
    out = int(vc.get("out_hidden_size") or text_config(config)["hidden_size"])
    deepstack = vc.get("deepstack_visual_indexes") or []
    stacked = sum(1 for i in deepstack if i < depth - 1) * out // merge  # made before the last block runs
    attention = 2 * h + (3 * h + 2 * h + 2 * h + h) // tp + 4 * (heads // tp) * padded_head(h // heads)
    mlp = 3 * h + 2 * inter // tp + h
    end = h + (out + 2 * (1 + len(deepstack)) * out) // merge
    peak = pixels + h + max(stacked + max(attention, mlp), end)
    outputs = patches // merge * out * (1 + len(deepstack))
    return patches * peak * dtype, outputs + patches * pixels * dtype, patches


def segment_slack(nbytes: int) -> int:
    """What torch_npu's allocator keeps reserved, and not allocated, beside one live tensor of `nbytes` (see
    ALLOC_PAD): the split-off rest of its own segment. Requests under 10 MiB share 20 MiB segments: counted as 0."""
    rounded = -(-(nbytes + ALLOC_PAD) // ALLOC_ROUND) * ALLOC_ROUND
    if rounded < MIN_LARGE_ALLOC:
        return 0
    rest = -(-rounded // SEGMENT_ROUND) * SEGMENT_ROUND - rounded
    return rest if rest > SPLIT_ABOVE else 0


def weight_tensors(cfg: Dict[str, Any], tp: int, dtype: int, linear_bytes: float) -> List[int]:
    """The bytes of each large parameter vLLM allocates on one card, one allocation each (the model is built under
    the device: torch.empty per parameter): embedding and LM head (vocab padded to 64, VocabParallelEmbedding),
    per full-attention layer the merged qkv_proj (q doubled by Qwen3-Next's output gate) and o_proj, per Gated
    DeltaNet layer in_proj_qkvz, in_proj_ba and out_proj, per MLP the merged gate_up_proj and down_proj, per MoE
    layer the stacked w13 and w2 of all experts (TP-split), the shared expert and the router."""
    h = int(cfg["hidden_size"])
    heads, hd = int(cfg["num_attention_heads"]), head_dim(cfg)
    kv = int(cfg.get("num_key_value_heads") or heads)
    gated = 2 if str(cfg.get("model_type", "")).startswith("qwen3_next") or cfg.get("attn_output_gate") else 1
    q, kv_card = heads * hd * gated // tp, max(1, kv // tp) * hd
    vocab = -(-int(cfg.get("vocab_size") or 32000) // 64) * 64 // tp
    out = [vocab * h * dtype] * (1 if cfg.get("tie_word_embeddings") else 2)
    experts, _ = experts_of(cfg)
    moe_inter = _first(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 4 * h)
    shared = int(cfg.get("shared_expert_intermediate_size") or 0) or int(cfg.get("n_shared_experts") or 0) * moe_inter
    dense_first = int(cfg.get("first_k_dense_replace") or 0)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or 1)
    inter = _first(cfg.get("intermediate_size") or 4 * h)

    def linear(rows: int) -> int:
        return int(rows * h * linear_bytes)

    for i, kind in enumerate(layer_kinds(cfg)):
        if kind == "state" and cfg.get("linear_num_value_heads"):
            vh = int(cfg["linear_num_value_heads"])
            kh = int(cfg.get("linear_num_key_heads") or vh)
            kd, vd = int(cfg.get("linear_key_head_dim") or 128), int(cfg.get("linear_value_head_dim") or 128)
            out += [linear((2 * kh * kd + 2 * vh * vd) // tp), linear(2 * vh // tp), linear(vh * vd // tp)]
        elif kind != "state":
            out += [linear(q + 2 * kv_card), linear(heads * hd // tp)]
        if experts and i >= dense_first and i not in mlp_only and (i + 1) % step == 0:
            out += [
                int(experts * 2 * moe_inter // tp * h * linear_bytes),
                int(experts * moe_inter // tp * h * linear_bytes),
                experts * h * dtype,
            ]
            if shared:
                out += [linear(2 * shared // tp), linear(shared // tp)]
        else:
            out += [linear(2 * inter // tp), linear(inter // tp)]
    return out


def non_kv_terms(
    config: Dict[str, Any],
    *,
    tp: int,
    weights_card: int,
    weights_source: str,
    dtype: int,
    max_model_len: int,
    serving: Serving,
    moe: bool,
    in_use: Term,
    linear_bytes: float = 0,
) -> List[Term]:
    """Every term vLLM subtracts before sizing the KV cache on one card, and the graph pool it does not."""
    cfg = text_config(config)
    tokens = serving.max_num_batched_tokens  # profile_run's dummy batch: max_num_tokens
    forward, phase = text_peak(cfg, tokens, tp, dtype)
    vocab = int(cfg.get("vocab_size") or 32000)
    hidden = int(cfg["hidden_size"])
    rows = min(serving.max_num_seqs, tokens)
    logits = (tokens + rows) * hidden * dtype + rows * vocab * dtype * (1 + (1 / tp if tp > 1 else 0))
    encoder, kept, patches = vision_peak(config, max_model_len, dtype, tp)
    phases = {
        f"the forward pass at {tokens:,} tokens ({phase})": kept + forward,
        f"the logits of {rows} rows over {vocab:,} tokens": kept + int(logits),
    }
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
    version = ".".join(map(str, serving.vllm_ascend))
    how = (
        "counts the whole device's non-torch memory (worker determine_available_memory up to 0.14: "
        "non_torch_allocations)"
        if serving.absolute_accounting
        else "leaves it out of the KV cache but refuses to start when utilisation x total is more than the rest"
    )
    terms.append(
        Term(in_use.name, in_use.bytes, f"vllm-ascend {version} {how}: {in_use.source}", serving.absolute_accounting)
    )
    if serving.absolute_accounting and serving.vllm_ascend <= FIXED_SEGMENTS_UNTIL:
        tensors = weight_tensors(cfg, tp, dtype, linear_bytes or dtype)
        slack = sum(segment_slack(n) for n in tensors)
        split = sum(1 for n in tensors if segment_slack(n))
        terms.append(
            Term(
                "allocator slack",
                slack,
                f"torch_npu's caching allocator pads each request by 32 B and gives one of 10 MiB or more a "
                f"segment rounded to 2 MiB (NPUCachingAllocator.cpp round_size, get_allocation_size): "
                f"{split} of the {len(tensors)} large weights per card keep their segment's split-off rest "
                "reserved; vllm-ascend up to 0.13 counts reserved-but-unallocated memory as non-torch "
                "(non_torch_allocations = used - torch allocated) and leaves segments fixed "
                "(expandable_segments from 0.14.0rc1)",
            )
        )
    if tp > 1:
        communicators = 2 if moe else 1
        terms.append(
            Term(
                "TP buffers",
                communicators * HCCL_BUFFER,
                f"HCCL: 2 x HCCL_BUFFSIZE (200 MB default) per communicator, {communicators} "
                + ("(the TP group and the MoE dispatch group)" if moe else "(the TP group)"),
            )
        )
    terms.append(
        Term(
            "graph pool",
            0,
            "none: --enforce-eager"
            if serving.enforce_eager
            else "captured after the KV cache is sized (not in its budget): 0.09-0.46 GiB published "
            "(vllm-ascend #9606, #4594, the field report); it must fit in the (1 - utilisation) left over",
            in_budget=False,
        )
    )
    return terms


def budgeted(terms: List[Term]) -> int:
    return sum(t.bytes for t in terms if t.in_budget)
