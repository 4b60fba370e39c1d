"""Model directories written here for fit, hub and serve: configs with the architecture fields as the published
ones have them (the field report's two models among them), and safetensors shards whose headers say their size."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Dict, Optional

from ascend_setup.fit.cards import card_named
from ascend_setup.fit.safetensors import DTYPE_BYTES
from ascend_setup.matrix import load_matrix

ROW = load_matrix().rows["9.1.0"]
CARD = card_named("910B3")

QWEN3_VL_8B = {  # Qwen3-VL-8B-Instruct's config.json (the fields fit reads)
    "model_type": "qwen3_vl",
    "architectures": ["Qwen3VLForConditionalGeneration"],
    "vision_config": {
        "depth": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "out_hidden_size": 4096,
        "spatial_merge_size": 2,
        "patch_size": 16,
        "temporal_patch_size": 2,
        "in_channels": 3,
        "num_position_embeddings": 2304,
        "deepstack_visual_indexes": [8, 16, 24],
    },
    "text_config": {
        "model_type": "qwen3_vl_text",
        "hidden_size": 4096,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 12288,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
}
HYBRID_27B = {  # the report's Qwen3.8-27B: 16 of 64 layers full attention (Gated DeltaNet between)
    "model_type": "qwen3_next",
    "hidden_size": 5120,
    "num_hidden_layers": 64,
    "full_attention_interval": 4,
    "num_attention_heads": 24,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "linear_num_value_heads": 48,
    "linear_num_key_heads": 16,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "intermediate_size": 17408,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
}
MOE_30B_A3B = {  # Qwen3-30B-A3B
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 768,
    "intermediate_size": 6144,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
}
MLA = {  # DeepSeek-V2-Lite
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "intermediate_size": 10944,
    "vocab_size": 102400,
    "torch_dtype": "bfloat16",
}
SLIDING = {  # gemma-2 style: sliding and global attention alternate
    "model_type": "gemma2",
    "hidden_size": 3584,
    "num_hidden_layers": 42,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "sliding_window": 4096,
    "intermediate_size": 14336,
    "layer_types": ["sliding_attention", "full_attention"] * 21,
    "vocab_size": 256000,
    "torch_dtype": "bfloat16",
}


def make_model(
    tmp_path: Path, config: dict, shards: Optional[Dict[str, Dict[str, tuple]]] = None, data: bool = True
) -> Path:
    """A model directory: config.json, and safetensors shards {file: {tensor: (dtype, nbytes)}}."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    weight_map = {}
    for shard, tensors in (shards or {}).items():
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, (dtype, size) in tensors.items():
            header[name] = {
                "dtype": dtype,
                "shape": [size // DTYPE_BYTES[dtype]],
                "data_offsets": [offset, offset + size],
            }
            offset += size
            weight_map[name] = shard
        blob = json.dumps(header).encode()
        with (tmp_path / shard).open("wb") as handle:
            handle.write(struct.pack("<Q", len(blob)) + blob)
            if data:
                handle.write(b"\0" * offset)
            else:  # as large as its header says, without the bytes (a sparse file)
                handle.truncate(8 + len(blob) + offset)
    if len(shards or {}) > 1:
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return tmp_path


DENSE = {
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 12288,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
DEEPSEEK_V2_LITE = {
    **MLA,
    "n_routed_experts": 64,
    "num_experts_per_tok": 6,
    "n_shared_experts": 2,
    "first_k_dense_replace": 1,
    "moe_intermediate_size": 1408,
}
