"""Simulated model directories, one per family of the serve table: a real config.json and a real safetensors
file whose header describes the weights at their real size, as a sparse file (gigabytes claimed, almost nothing
on disk). fit reads them as it reads a real checkpoint, and the stub vllm streams at the rate their bytes give."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Dict, List, Tuple

BASE: Dict[str, Any] = {
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 12288,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}

CONFIGS: Dict[str, Dict[str, Any]] = {
    "dense": {**BASE, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    "vision": {
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "text_config": {**BASE, "model_type": "qwen3_vl_text", "max_position_embeddings": 262144},
        "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16},
    },
    "moe": {
        **BASE,
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
    },
    "hybrid": {
        **BASE,
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "full_attention_interval": 4,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 262144,
    },
    "mla": {
        **BASE,
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "num_hidden_layers": 27,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "n_routed_experts": 64,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 1408,
        "max_position_embeddings": 163840,
    },
    "modelslim": {**BASE, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
}


def _tensors(family: str, weight_bytes: int) -> List[Tuple[str, str, List[int]]]:
    """(name, dtype, shape) adding up to about `weight_bytes`: an embedding, the layers' bulk, an LM head."""
    vocab, hidden = 151936, 4096
    embed = vocab * hidden * 2
    dtype, width = ("I8", 1) if family == "modelslim" else ("BF16", 2)
    bulk = max(weight_bytes - 2 * embed, 1 << 20) // width
    parts = [("model.embed_tokens.weight", "BF16", [vocab, hidden])]
    if family == "vision":
        parts.append(("model.visual.blocks.weight", "BF16", [400_000_000]))
    if family in ("moe", "mla"):
        parts.append(("model.layers.0.mlp.experts.weight", dtype, [bulk * 3 // 4]))
        parts.append(("model.layers.0.self_attn.weight", dtype, [bulk // 4]))
    else:
        parts.append(("model.layers.0.mlp.weight", dtype, [bulk]))
    parts.append(("lm_head.weight", "BF16", [vocab, hidden]))
    return parts


def build_model(directory: Path, family: str = "dense", weight_bytes: int = 16 * 10**9) -> Path:
    """A model directory of `family` (a key of CONFIGS) whose one shard claims about `weight_bytes`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(CONFIGS[family], indent=2))
    header: Dict[str, Any] = {"__metadata__": {"format": "pt", "simulated": "true"}}
    offset = 0
    for name, dtype, shape in _tensors(family, weight_bytes):
        size = 2 if dtype == "BF16" else 1
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    shard = directory / "model.safetensors"
    with shard.open("wb") as handle:
        handle.write(struct.pack("<Q", len(blob)) + blob)
        handle.truncate(8 + len(blob) + offset)  # sparse: the size is real, the disk holds only the header
    if family == "modelslim":
        (directory / "quant_model_description.json").write_text(json.dumps({"model_quant_type": "W8A8"}))
    (directory / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    return directory
