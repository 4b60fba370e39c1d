"""The KV cache as vLLM 0.23 lays it out on Ascend: blocks, pages, groups, and what it prints.

Each figure follows the code that computes it (read from the vLLM 0.23.0 wheel and the vllm-ascend 0.23.0 sdist):
- block size: 128 tokens on Ascend (vllm_ascend/utils.py refresh_block_size). A hybrid model's attention block
  grows until one attention block's K half holds one linear-attention state: 128 x cdiv(ssm page, 128 x K bytes per
  token) (vllm_ascend/patch/platform/patch_mamba_config.py, 0.16.0rc1 to 0.23.0). Up to 0.15.0rc1 the same patch
  sized it so the whole K and V page held the ssm and conv states: 128 x cdiv(ssm + conv, 128 x K and V bytes per
  token), giving 384 where 0.16 on gives 512 for Qwen3-Next at TP4 (vllm-ascend #6250, 0.13.0rc2: 'Available
  memory: 9786143744' // 393,216-byte pages // 12 layers = 2,073 blocks, 518 x 384 = the 198,912 tokens printed).
- page: a layer's bytes per block; a hybrid's attention and state pages are padded to one size: from 0.16.0rc1 the
  attention page plus the conv state (patch_mamba_config.py; model_runner_v1.py get_kv_cache_spec pads the attention
  side), up to 0.15.0rc1 the attention page alone (the state padded up to it).
- groups: layers of one kind in groups of the smaller kind's count (or the larger's when under 1.5x), one memory
  pool per layer of a group (vllm/v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size,
  get_kv_cache_config_from_groups): num_blocks = available // page // layers per group.
- per request: cdiv(max_model_len, block) blocks in each full-attention group, the window's blocks in a sliding one,
  one block in a state group; concurrency = num_blocks / that (get_max_concurrency_for_kv_cache_config).
- printed tokens: vLLM 0.23 prints int(concurrency x max_model_len) (_report_kv_cache_config); earlier releases
  printed num_blocks // groups x block size, which for a hybrid is not concurrency x context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ascend_setup.fit.config import text_config

#: vllm_ascend/utils.py refresh_block_size: the block vLLM-Ascend uses (and its attention kernels' alignment).
ASCEND_BLOCK = 128
#: The last vllm-ascend release whose patch_mamba_config.py sized a hybrid's block by the K and V page holding the
#: ssm and conv states together (0.11.0rc3 to 0.15.0rc1; 0.16.0rc1 aligns the K half to the ssm state alone).
WHOLE_PAGE_STATE_UNTIL = (0, 15)
#: The dtypes a state may be kept in (config.json's mamba_ssm_dtype; the model's dtype otherwise).
STATE_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class KvPool:
    """One card's KV cache layout: what a block costs and what a request needs."""

    block_size: int
    page_bytes: int  # per layer and block, padded to the one page size
    layers_per_group: int
    full_groups: int
    sliding_groups: int
    state_groups: int
    window: int  # a sliding group's window in tokens (0 when there is none)
    attention_token_bytes: int  # one layer's K and V of one token, unpadded
    state_page_bytes: int  # one linear-attention layer's state (ssm + conv), unpadded
    layout: str  # how it was derived, in words

    @property
    def groups(self) -> int:
        return self.full_groups + self.sliding_groups + self.state_groups

    @property
    def block_bytes(self) -> int:
        """Memory one block number takes over every pool."""
        return self.page_bytes * self.layers_per_group

    def blocks_per_request(self, max_model_len: int) -> int:
        sliding = (
            min(cdiv(max_model_len, self.block_size), cdiv(self.window, self.block_size) + 1) if self.window else 0
        )
        return (
            self.full_groups * cdiv(max_model_len, self.block_size) + self.sliding_groups * sliding + self.state_groups
        )

    def num_blocks(self, available_bytes: float) -> int:
        return max(0, int(available_bytes // self.page_bytes // self.layers_per_group))

    def concurrency(self, available_bytes: float, max_model_len: int) -> float:
        return self.num_blocks(available_bytes) / self.blocks_per_request(max_model_len)

    def printed_tokens(self, available_bytes: float, max_model_len: int) -> int:
        """'GPU KV cache size: N tokens' as vLLM 0.23 prints it."""
        return int(self.concurrency(available_bytes, max_model_len) * max_model_len)

    def block_tokens(self, available_bytes: float) -> int:
        """The same line as vLLM < 0.23 printed it: blocks per group x block size."""
        return self.num_blocks(available_bytes) // max(1, self.groups) * self.block_size

    def largest_context(self, available_bytes: float, concurrency: int) -> int:
        """The longest max_model_len at which `concurrency` requests all get their blocks (whole blocks)."""
        spare = self.num_blocks(available_bytes) // max(1, concurrency) - self.state_groups
        if self.window:
            spare -= self.sliding_groups * (cdiv(self.window, self.block_size) + 1)
        if spare <= 0 or not self.full_groups:
            return 0
        return spare // self.full_groups * self.block_size


def kv_heads_per_card(cfg: Dict[str, Any], tp: int) -> int:
    """KV heads split over the cards, one replicated on each when there are fewer heads than cards."""
    heads = int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    return max(1, heads // tp)


def head_dim(cfg: Dict[str, Any]) -> int:
    return int(cfg.get("head_dim") or max(1, cfg["hidden_size"] // cfg["num_attention_heads"]))


def state_pages(cfg: Dict[str, Any], tp: int, model_bytes: int) -> Tuple[int, int]:
    """(ssm page, conv page) of one linear-attention layer on one card, as vLLM's MambaStateShapeCalculator
    shapes them (vllm/model_executor/layers/mamba/mamba_utils.py): Gated DeltaNet (Qwen3-Next, Qwen3.5) or Mamba2;
    (0, 0) when the config says too little."""
    ssm_bytes = STATE_DTYPE_BYTES.get(str(cfg.get("mamba_ssm_dtype") or ""), model_bytes)
    conv_kernel = int(cfg.get("linear_conv_kernel_dim") or cfg.get("conv_kernel") or cfg.get("mamba_d_conv") or 4)
    if cfg.get("linear_num_value_heads"):  # gated_delta_net_state_shape
        v_heads, k_heads = (
            int(cfg["linear_num_value_heads"]),
            int(cfg.get("linear_num_key_heads") or cfg["linear_num_value_heads"]),
        )
        k_dim, v_dim = int(cfg.get("linear_key_head_dim") or 128), int(cfg.get("linear_value_head_dim") or 128)
        conv_dim = k_dim * k_heads * 2 + v_dim * v_heads
        return (v_heads // tp * v_dim * k_dim * ssm_bytes, conv_dim // tp * (conv_kernel - 1) * model_bytes)
    d_state = int(cfg.get("mamba_d_state") or cfg.get("state_size") or 0)
    if d_state:  # mamba2_state_shape (mamba1's d_inner x d_state when no head count is given)
        d_inner = int(cfg.get("mamba_expand") or cfg.get("expand") or 2) * int(cfg["hidden_size"])
        groups = int(cfg.get("mamba_n_groups") or cfg.get("n_groups") or 1)
        conv = (d_inner + 2 * groups * d_state) // tp * (conv_kernel - 1) * model_bytes
        return d_inner // tp * d_state * ssm_bytes, conv
    return 0, 0


def plan_pool(
    config: Dict[str, Any],
    kinds: List[str],
    tp: int,
    kv_bytes: int,
    model_bytes: int,
    release: Tuple[int, int] = (0, 23),
) -> KvPool:
    """The layout for a config whose layers are `kinds` (full / sliding / state, from model_files.layer_kinds), as
    vllm-ascend `release` (major, minor) lays out a hybrid."""
    cfg = text_config(config)
    full, sliding, state = kinds.count("full"), kinds.count("sliding"), kinds.count("state")
    if cfg.get("kv_lora_rank"):  # MLA: one latent (and its rope part) per token, whole on every card
        token_k = (int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 64)) * kv_bytes
        token = token_k
    else:
        token_k = head_dim(cfg) * kv_heads_per_card(cfg, tp) * kv_bytes
        token = 2 * token_k
    window = int(cfg.get("sliding_window") or 0) if sliding else 0
    if not state:
        kinds_present = [n for n in (full, sliding) if n]
        size = _group_size(kinds_present)
        return KvPool(
            ASCEND_BLOCK,
            ASCEND_BLOCK * token,
            size,
            cdiv(full, size) if full else 0,
            cdiv(sliding, size) if sliding else 0,
            0,
            window,
            token,
            0,
            f"{ASCEND_BLOCK}-token blocks of {ASCEND_BLOCK * token / 1024:.0f} KiB per layer",
        )
    ssm, conv = state_pages(cfg, tp, model_bytes)
    if not ssm:
        raise ValueError("linear-attention layers without their state sizes")
    if release <= WHOLE_PAGE_STATE_UNTIL:
        block = max(ASCEND_BLOCK, ASCEND_BLOCK * cdiv(ssm + conv, ASCEND_BLOCK * token))
        page, padding = block * token, "state padded to the attention page"
        held = f"one K and V page holds a {(ssm + conv) / 2**20:.2f} MiB state (vllm-ascend <= 0.15)"
    else:
        block = max(ASCEND_BLOCK, ASCEND_BLOCK * cdiv(ssm, ASCEND_BLOCK * token_k))
        page, padding = block * token + conv, f"attention page + {conv / 1024:.0f} KiB conv state"
        held = f"one K half holds a {ssm / 2**20:.2f} MiB state"
    size = _group_size([n for n in (full + sliding, state) if n])
    return KvPool(
        block,
        page,
        size,
        cdiv(full, size) if full else 0,
        cdiv(sliding, size) if sliding else 0,
        cdiv(state, size),
        window,
        token,
        ssm + conv,
        f"hybrid: attention blocks of {block} tokens so {held}; "
        f"pages padded to {page / 2**20:.3f} MiB ({padding}); "
        f"{cdiv(full + sliding, size) if full + sliding else 0} attention + {cdiv(state, size)} state "
        f"groups of {size} layers",
    )


def _group_size(counts: List[int]) -> int:
    """_get_kv_cache_groups_uniform_page_size: the smaller kind's layer count, or the larger's under 1.5x."""
    if not counts:
        return 1
    low, high = min(counts), max(counts)
    return high if high < low * 1.5 else low
