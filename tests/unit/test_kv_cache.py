"""vLLM's KV cache layout on Ascend, by hand from the code fit/kv_cache.py cites: blocks, padded pages, groups and
the two ways vLLM printed the KV cache size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.models import DENSE, MLA

from ascend_setup.fit.kv_cache import plan_pool
from ascend_setup.fit.model_files import layer_kinds

QWEN3_NEXT = {  # Qwen3-Next-80B-A3B's attention and Gated DeltaNet fields
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "full_attention_interval": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "torch_dtype": "bfloat16",
}


def _pool(config: dict, tp: int):
    return plan_pool(config, layer_kinds(config), tp, 2, 2)


def test_a_dense_model_is_one_group_of_128_token_blocks() -> None:
    pool = _pool(DENSE, 1)
    assert (pool.block_size, pool.page_bytes, pool.layers_per_group, pool.groups) == (128, 128 * 2 * 8 * 128 * 2, 36, 1)
    available = 1000 * pool.block_bytes + 5
    assert pool.num_blocks(available) == 1000 and pool.blocks_per_request(10000) == 79  # cdiv(10000, 128)
    assert pool.printed_tokens(available, 10000) == int(1000 / 79 * 10000)  # vLLM 0.23: concurrency x context
    assert pool.block_tokens(available) == 128_000  # vLLM < 0.23: blocks x block size
    assert pool.largest_context(available, 4) == 250 * 128


def test_qwen3_next_at_tp4_pads_attention_to_the_deltanet_state() -> None:
    pool = _pool(QWEN3_NEXT, 4)
    ssm = 32 // 4 * 128 * 128 * 2  # (v heads / tp, v dim, k dim) in bf16
    conv = (128 * 16 * 2 + 128 * 32) // 4 * (4 - 1) * 2  # conv_dim / tp x (kernel - 1)
    k_token = 256 * 1 * 2  # 2 KV heads over 4 cards: one replicated on each
    assert pool.block_size == 128 * -(-ssm // (128 * k_token)) == 512
    assert pool.page_bytes == 512 * 2 * k_token + conv
    assert (pool.layers_per_group, pool.full_groups, pool.state_groups) == (12, 1, 3)  # 12 full + 36 DeltaNet
    assert pool.blocks_per_request(32768) == 64 + 3  # the full group's blocks, one per state group
    available = 9786143744  # rank 0's "Available memory" in vllm-ascend #6250
    blocks = available // pool.page_bytes // 12
    assert pool.concurrency(available, 32768) == pytest.approx(blocks / 67)
    assert pool.block_tokens(available) == blocks // 4 * 512  # not concurrency x context
    assert pool.printed_tokens(available, 32768) != pool.block_tokens(available)


def test_up_to_0_15_the_whole_kv_page_holds_the_state_and_reproduces_the_published_lines() -> None:
    """vllm-ascend 0.11.0rc3 to 0.15.0rc1 (patch_mamba_config.py): block = 128 x cdiv(ssm + conv, 128 x K and V
    bytes per token), the state padded to the attention page. From #6250's (0.13.0rc2) own "Available memory" line
    this gives the two lines it printed: 198,912 tokens and 23.29x at 32,768."""
    pool = plan_pool(QWEN3_NEXT, layer_kinds(QWEN3_NEXT), 4, 2, 2, (0, 13))
    ssm, conv = 32 // 4 * 128 * 128 * 2, (128 * 16 * 2 + 128 * 32) // 4 * (4 - 1) * 2
    kv_token = 2 * 256 * 1 * 2
    assert pool.block_size == 128 * -(-(ssm + conv) // (128 * kv_token)) == 384
    assert pool.page_bytes == 384 * kv_token  # no conv state on top
    available = 9786143744  # rank 0's "Available memory" in vllm-ascend #6250
    assert pool.block_tokens(available) == 198_912
    assert round(pool.concurrency(available, 32768), 2) == 23.29
    assert plan_pool(QWEN3_NEXT, layer_kinds(QWEN3_NEXT), 4, 2, 2, (0, 16)).block_size == 512


def test_a_float32_state_and_tp2_as_qwen3_6_27b_declares() -> None:
    config = {
        **QWEN3_NEXT,
        "hidden_size": 5120,
        "num_hidden_layers": 64,
        "num_attention_heads": 24,
        "num_key_value_heads": 4,
        "linear_num_value_heads": 48,
        "mamba_ssm_dtype": "float32",
    }
    pool = _pool(config, 2)
    ssm = 24 * 128 * 128 * 4
    assert pool.block_size == 128 * -(-ssm // (128 * 256 * 2 * 2)) == 1536
    assert (pool.layers_per_group, pool.full_groups, pool.state_groups) == (16, 1, 3)


def test_mla_keeps_one_latent_on_every_card() -> None:
    one, eight = _pool(MLA, 1), _pool(MLA, 8)
    assert one.page_bytes == eight.page_bytes == 128 * (512 + 64) * 2


def test_the_referees_real_hybrid_config_plans(tmp_path: Path) -> None:
    referee = Path(__file__).resolve().parents[3] / "shared" / "fit-referee" / "configs"
    path = referee / "Qwen__Qwen3-Next-80B-A3B-Instruct.json"
    if not path.is_file():
        pytest.skip(f"the referee is not beside this checkout ({referee})")
    config = json.loads(path.read_text())
    assert _pool(config, 4).page_bytes == _pool(QWEN3_NEXT, 4).page_bytes
