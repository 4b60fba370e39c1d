"""A config's missing dimensions, read off the shapes of its safetensors tensors.

A partial config (the referee's Qwen3.8-27B lists only its layer pattern and KV heads) has no estimate from its
fields alone, but the checkpoint's headers say what the config does not: each tensor's shape is a dimension the
model was built with, named as the model's own module code names it (transformers' and vLLM's Qwen3, Qwen3-Next
and Qwen3.5 modules: embed_tokens, self_attn.{k,o}_proj, self_attn.q_norm, mlp.down_proj, linear_attn.{A_log,
out_proj,conv1d}). A field the config gives is never replaced; a field no tensor shows stays missing, and fit
then names it. Only unpacked tensors are read (float, or one byte per weight): a packed 4-bit weight's shape is
not the layer's.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

#: Tensors whose shape is the layer's own (a packed sub-byte weight is stored in these dtypes only as I32/U8).
UNPACKED = ("BF16", "F16", "F32", "F8_E4M3", "F8_E5M2", "I8")
#: A language-model layer's tensor: layers.N.<module>.<name> outside a vision or audio tower and the MTP head.
LAYER = re.compile(r"(?:^|\.)layers\.\d+\.(self_attn|linear_attn|mlp)\.([A-Za-z0-9_.]+)$")
TOWERS = ("visual", "vision", "audio", "mtp.", "talker", "token2wav")
#: transformers' Qwen3NextConfig / Qwen3_5TextConfig default: fit's state size assumes it too (kv_cache.py).
DEFAULT_LINEAR_KEY_HEAD_DIM = 128


def _shapes(headers: List[Dict[str, Any]]) -> Dict[Tuple[str, str], List[int]]:
    """(module, tensor name) -> the first language-model layer's shape of it; 'embed' for the input embedding."""
    found: Dict[Tuple[str, str], List[int]] = {}
    for header in headers:
        for name, entry in header.items():
            if name == "__metadata__" or any(t in name for t in TOWERS) or entry.get("dtype") not in UNPACKED:
                continue
            if name.endswith("embed_tokens.weight"):
                found.setdefault(("embed", "weight"), list(entry["shape"]))
                continue
            match = LAYER.search(name)
            if match and ".experts." not in name:
                found.setdefault((match.group(1), match.group(2)), list(entry["shape"]))
    return found


def dims_from_headers(cfg: Dict[str, Any], headers: List[Dict[str, Any]]) -> Dict[str, int]:
    """The fields `cfg` (a text config) lacks that the tensors' shapes give, each as its config.json name."""
    shapes = _shapes(headers)
    out: Dict[str, int] = {}

    def given(key: str) -> Optional[int]:
        value = cfg.get(key) or out.get(key)
        return int(value) if isinstance(value, int) else None

    def put(key: str, value: int) -> None:
        if value > 0 and cfg.get(key) is None:
            out[key] = value

    embed = shapes.get(("embed", "weight"))
    if embed and len(embed) == 2:  # [vocab, hidden]
        put("vocab_size", embed[0])
        put("hidden_size", embed[1])
    norm = shapes.get(("self_attn", "q_norm.weight")) or shapes.get(("self_attn", "k_norm.weight"))
    if norm and len(norm) == 1:  # Qwen3's per-head RMSNorm: [head_dim]
        put("head_dim", norm[0])
    head = given("head_dim")
    o_proj, k_proj = shapes.get(("self_attn", "o_proj.weight")), shapes.get(("self_attn", "k_proj.weight"))
    if head and o_proj and len(o_proj) == 2 and o_proj[1] % head == 0:  # [hidden, heads x head_dim]
        put("num_attention_heads", o_proj[1] // head)
    if head and k_proj and len(k_proj) == 2 and k_proj[0] % head == 0:  # [kv heads x head_dim, hidden]
        put("num_key_value_heads", k_proj[0] // head)
    down = shapes.get(("mlp", "down_proj.weight"))
    if down and len(down) == 2:  # a dense MLP's [hidden, intermediate]
        put("intermediate_size", down[1])
    _linear_attention(shapes, given, put)
    return out


def _linear_attention(
    shapes: Dict[Tuple[str, str], List[int]],
    given: Callable[[str], Optional[int]],
    put: Callable[[str, int], None],
) -> None:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5): A_log is [value heads], out_proj [hidden, value heads x value dim],
    conv1d [2 x key heads x key dim + value heads x value dim, 1, kernel] (vLLM's qwen3_next.py)."""
    a_log = shapes.get(("linear_attn", "A_log"))
    if not a_log or len(a_log) != 1:
        return
    put("linear_num_value_heads", a_log[0])
    v_heads = given("linear_num_value_heads")
    out_proj = shapes.get(("linear_attn", "out_proj.weight"))
    if v_heads and out_proj and len(out_proj) == 2 and out_proj[1] % v_heads == 0:
        put("linear_value_head_dim", out_proj[1] // v_heads)
    conv = shapes.get(("linear_attn", "conv1d.weight"))
    v_dim = given("linear_value_head_dim")
    if conv and len(conv) == 3 and v_heads and v_dim:
        put("linear_conv_kernel_dim", conv[2])
        k_dim = given("linear_key_head_dim") or DEFAULT_LINEAR_KEY_HEAD_DIM
        keys = conv[0] - v_heads * v_dim
        if keys > 0 and keys % (2 * k_dim) == 0:
            put("linear_num_key_heads", keys // (2 * k_dim))
