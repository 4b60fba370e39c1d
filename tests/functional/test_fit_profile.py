"""fit's non-KV terms against what vllm-ascend's own start-up code measures, release by release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.models import make_model as _model

from ascend_setup.fit.cards import card_named
from ascend_setup.fit.profile import GIB, WORKER_CONTEXT, Serving, in_use_at_start, non_kv_terms, segment_slack

#: Qwen3-0.6B's config.json (the fields fit reads).
QWEN3_06B = {
    "model_type": "qwen3",
    "hidden_size": 1024,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
#: Qwen3-8B's (vllm-ascend #5044's model).
QWEN3_8B = {
    **QWEN3_06B,
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "intermediate_size": 12288,
    "tie_word_embeddings": False,
}


def _terms(serving: Serving) -> dict:
    terms = non_kv_terms(
        QWEN3_06B,
        tp=1,
        weights_card=int(1.14 * GIB),
        weights_source="safetensors",
        dtype=2,
        max_model_len=40960,
        serving=serving,
        moe=False,
        in_use=in_use_at_start(card_named("910B3")),
    )
    return {t.name: t for t in terms}


def test_the_profiling_peak_is_the_forward_not_a_sampler_vllm_ascend_does_not_run() -> None:
    """vllm-ascend's _dummy_sampler_run computes the logits only (no float32 copies, softmax or top-k/top-p):
    Qwen3-0.6B as the LLM class profiles it (8192 tokens, 256 rows) printed "0.22 GiB for peak activation" in
    vllm-ascend PR #9606's start-up summary; counting a sampler's float32 copies gave 0.67 GiB."""
    peak = _terms(Serving(8192, 256))["profiling peak"]
    assert abs(peak.bytes / GIB - 0.22) < 0.06, peak
    assert "forward pass" in peak.source


@pytest.mark.parametrize(
    "release, counted", [((0, 9), True), ((0, 11), True), ((0, 14), True), ((0, 15), False), ((0, 23), False)]
)
def test_releases_up_to_0_14_count_what_the_device_held_before_vllm_started(release: tuple, counted: bool) -> None:
    """worker determine_available_memory: non_torch_allocations (the whole device's) up to 0.14.0rc1, the increase
    since the worker's start-up snapshot from 0.15.0rc1."""
    terms = _terms(Serving(8192, 256, vllm_ascend=release))
    assert terms["in use at start-up"].in_budget is counted  # later releases only check it at start-up
    assert terms["in use at start-up"].bytes == WORKER_CONTEXT + 282 * 2**20  # the context and the idle 910B


def test_fit_takes_the_release_and_refuses_what_is_not_one(cli, tmp_path: Path) -> None:
    model = _model(tmp_path / "m", QWEN3_06B, {"model.safetensors": {"model.w": ("BF16", 1 << 20)}})
    old, new = (
        json.loads(
            cli("fit", str(model), "--json", "--no-calibration", "--workdir", str(tmp_path / "w"), *extra).stdout
        )
        for extra in (["--vllm-ascend", "0.11.0rc3"], [])
    )
    terms = {t["name"]: t["bytes"] for t in old["memory_terms"]}
    counted = terms["in use at start-up"] + terms["allocator slack"]
    assert old["kv_available_bytes"] == new["kv_available_bytes"] - counted
    assert "0.11" in " ".join(old["arithmetic"])
    for bad in ("eleven", "0.11.0-beta", "1e3"):
        line = assert_one_line_error(cli("fit", str(model), "--vllm-ascend", bad))
        assert "--vllm-ascend" in line and "release" in line


def test_the_vision_encoder_peak_counts_every_tensor_alive_in_the_last_blocks_attention() -> None:
    """Qwen3-VL-8B's tower on its largest image (65,536 patches of 3 x 2 x 16 x 16 pixels, hidden 1152, 16 heads
    of 72 padded to 128, deepstack after blocks 8, 16 and 24 of 27), traced tensor by tensor through vLLM 0.23.0's
    qwen3_vl.py / qwen2_5_vl.py and vllm-ascend 0.23.0's mm_encoder_attention.py at the FIA call of block 26."""
    vision = {
        "hidden_size": 1152,
        "num_heads": 16,
        "depth": 27,
        "intermediate_size": 4304,
        "patch_size": 16,
        "temporal_patch_size": 2,
        "in_channels": 3,
        "spatial_merge_size": 2,
        "out_hidden_size": 4096,
        "deepstack_visual_indexes": [8, 16, 24],
    }
    config = {
        "model_type": "qwen3_vl",
        "vision_config": vision,
        "text_config": {
            **QWEN3_06B,
            "hidden_size": 4096,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "intermediate_size": 12288,
        },
    }
    n = 65536
    alive = {
        "pixel_values (profile_run's dummy batch)": 3 * 2 * 16 * 16,
        "pos_embeds (encoder_metadata)": 1152,
        "deepstack_feature_lists (3 x 4096 per 4 patches)": 3 * 4096 // 4,
        "block input (hidden_states)": 1152,
        "norm1 output": 1152,
        "qkv output": 3 * 1152,
        "qk_reshaped.contiguous()": 2 * 1152,
        "qk_rotated (npu_rotary_mul)": 2 * 1152,
        "q, k, v padded to 128": 3 * 16 * 128,
        "FIA output": 16 * 128,
        "_restore_batch_layout copy": 1152,
    }
    terms = {
        t.name: t
        for t in non_kv_terms(
            config,
            tp=1,
            weights_card=int(16.63 * GIB),
            weights_source="safetensors",
            dtype=2,
            max_model_len=32768,
            serving=Serving(),
            moe=False,
            in_use=in_use_at_start(card_named("910B3")),
        )
    }
    peak = terms["profiling peak"]
    assert "vision encoder" in peak.source, peak
    assert peak.bytes == n * 2 * sum(alive.values()), (peak.bytes / GIB, n * 2 * sum(alive.values()) / GIB)


def test_torch_npus_allocator_keeps_a_split_segments_rest_reserved() -> None:
    """NPUCachingAllocator.cpp (Ascend/pytorch v2.5.1-7.0.0, v2.7.1-7.2.0): round_size adds 32 B and rounds to 512;
    10 MiB and over gets a segment rounded to 2 MiB; a rest over 1 MiB is split off and stays reserved."""
    mib = 1 << 20
    assert segment_slack(48 * mib) == 2 * mib - 512  # Qwen3-8B's qkv_proj: 48 MiB + 512 B in a 50 MiB segment
    assert segment_slack(int(12.5 * mib)) == int(1.5 * mib) - 512  # Qwen3-32B's qkv_proj at TP8
    assert segment_slack(int(31.25 * mib)) == 0  # a rest of 0.75 MiB is not split: it is allocated with the block
    assert segment_slack(4 * mib) == 0  # under 10 MiB: packed in shared 20 MiB segments


def test_the_slack_is_counted_only_by_the_releases_with_fixed_segments_and_absolute_accounting() -> None:
    """Qwen3-8B at TP1: 144 of its 146 large weights are whole 2 MiB multiples (0.28 GiB); vllm-ascend 0.14.0rc1
    turns expandable segments on, and 0.15.0rc1 stops counting non-torch memory absolutely."""
    for release, counted in (((0, 9), True), ((0, 13), True), ((0, 14), False), ((0, 23), False)):
        terms = {
            t.name: t
            for t in non_kv_terms(
                QWEN3_8B,
                tp=1,
                weights_card=0,
                weights_source="",
                dtype=2,
                max_model_len=10000,
                serving=Serving(vllm_ascend=release),
                moe=False,
                in_use=in_use_at_start(card_named("910B3")),
            )
        }
        assert ("allocator slack" in terms) is counted
        if counted:
            assert terms["allocator slack"].bytes == 144 * (2 * (1 << 20) - 512)
