"""What a model asks of a card, from its config.json and safetensors headers only (no download).

The field report's lesson: a dense-KV, paper-bandwidth estimate said "about 14B" fits a 910B; the
measurement said 27B, because Qwen3.8-27B keeps a growing KV cache in only 16 of its 64 layers (the
rest are Gated DeltaNet with a fixed state). So KV is counted per layer kind:
- full attention (GQA): 2 x KV heads x head_dim x bytes per token;
- MLA (DeepSeek): (kv_lora_rank + qk_rope_head_dim) x bytes per token (one latent for K and V);
- sliding window: as full attention, but never more than the window's tokens;
- linear attention / Gated DeltaNet / Mamba: a fixed state per sequence, not per token.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List

from ascend_setup.errors import BadInput
from ascend_setup.inputs import load_json, open_input, parse_json

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "I32": 4,
               "I64": 8, "I16": 2, "BOOL": 1, "float32": 4, "float16": 2, "bfloat16": 2}
FULL = ("full_attention", "attention", "global_attention")
SLIDING = ("sliding_attention", "sliding_window", "local_attention")
LINEAR = ("linear_attention", "mamba", "gated_deltanet", "deltanet", "ssm")
VISION_PARTS = ("visual.", "vision_tower.", "vision_model.", "model.visual.", "image_newline", "multi_modal_projector.")


@dataclass
class Weights:
    total_bytes: int
    per_token_bytes: int  # read for every decoded token: no vision tower, only the active experts
    source: str  # safetensors | config
    dtype: str
    note: str = ""


@dataclass
class KvLayout:
    per_token_bytes: float  # at the given context (sliding layers averaged over it)
    full_layers: int
    sliding_layers: int
    state_layers: int
    state_bytes_per_sequence: int
    kinds: Dict[str, int] = field(default_factory=dict)


def load_config(model: Path) -> Dict[str, Any]:
    path = model / "config.json" if model.is_dir() else model
    try:
        config = load_json(path, "config", what=f"MODEL {model}: {path.name}")
        if not isinstance(config, dict) or not isinstance(text_config(config).get("num_hidden_layers"), int):
            raise ValueError("not a transformer config (no num_hidden_layers)")
        return config
    except FileNotFoundError:
        raise BadInput(f"MODEL {model}: no config.json there", hint="give a model directory or its config.json") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"MODEL {model}: config.json cannot be read ({exc})") from None


def text_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """The language model's part of a multimodal config (text_config / llm_config), else the config."""
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict):
            return {**config, **config[key]}
    return config


def _dtype_bytes(config: Dict[str, Any]) -> int:
    return DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"), 2)


def _head_dim(cfg: Dict[str, Any]) -> int:
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def layer_kinds(cfg: Dict[str, Any]) -> List[str]:
    """One kind per layer: full, sliding or state (linear attention, DeltaNet, Mamba)."""
    n = int(cfg["num_hidden_layers"])
    if isinstance(cfg.get("layer_types"), list) and len(cfg["layer_types"]) == n:
        kinds = []
        for t in cfg["layer_types"]:
            t = str(t).lower()
            kinds.append("sliding" if t in SLIDING else "state" if any(w in t for w in LINEAR) else "full")
        return kinds
    if cfg.get("full_attention_interval"):
        every = int(cfg["full_attention_interval"])
        return ["full" if (i + 1) % every == 0 else "state" for i in range(n)]
    if isinstance(cfg.get("layers_block_type"), list):
        return ["state" if "mamba" in str(t).lower() else "full" for t in cfg["layers_block_type"]]
    if cfg.get("sliding_window") and cfg.get("use_sliding_window", True) and cfg.get("max_window_layers") is not None:
        first_full = int(cfg["max_window_layers"])
        return ["sliding" if i >= first_full else "full" for i in range(n)]
    return ["full"] * n


def state_bytes_per_layer(cfg: Dict[str, Any]) -> int:
    """A linear-attention (Gated DeltaNet) or Mamba layer's fixed state, kept in fp32."""
    if cfg.get("linear_num_value_heads"):
        heads = int(cfg["linear_num_value_heads"])
        return heads * int(cfg.get("linear_key_head_dim", 128)) * int(cfg.get("linear_value_head_dim", 128)) * 4
    if cfg.get("mamba_d_state") or cfg.get("state_size"):
        d_inner = int(cfg.get("mamba_expand", cfg.get("expand", 2))) * int(cfg["hidden_size"])
        return d_inner * int(cfg.get("mamba_d_state") or cfg.get("state_size")) * 4
    return 0


def kv_layout(config: Dict[str, Any], context: int, kv_bytes: int) -> KvLayout:
    cfg = text_config(config)
    kinds = layer_kinds(cfg)
    if cfg.get("kv_lora_rank"):  # MLA: one compressed latent per token and layer
        per_layer = (int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim", 64))) * kv_bytes
    else:
        per_layer = 2 * int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"]) * _head_dim(cfg) * kv_bytes
    window = int(cfg.get("sliding_window") or 0)
    sliding_share = min(1.0, window / context) if window and context else 1.0
    full, sliding, state = kinds.count("full"), kinds.count("sliding"), kinds.count("state")
    return KvLayout(per_token_bytes=per_layer * (full + sliding * sliding_share), full_layers=full,
                    sliding_layers=sliding, state_layers=state,
                    state_bytes_per_sequence=state * state_bytes_per_layer(cfg),
                    kinds={"full": full, "sliding": sliding, "state": state})


def _safetensors_headers(model: Path) -> List[Dict[str, Any]]:
    """Each shard's header (the index json names the shards when the model is sharded)."""
    index = model / "model.safetensors.index.json"
    if index.exists() or index.is_symlink():  # a FIFO or a directory of that name is bad input, not ignored
        shards = sorted(set(load_json(index, "index")["weight_map"].values()))
        files = [model / s for s in shards]
    else:
        files = sorted(model.glob("*.safetensors"))
    headers = []
    for f in files:
        with open_input(f, "safetensors") as handle:
            size = struct.unpack("<Q", handle.read(8))[0]
            if size > 100 * 1024 * 1024:
                raise BadInput(f"{f}: not a safetensors file (a header of {size} bytes)")
            headers.append(parse_json(handle.read(size), f"safetensors header of {f}"))
    return headers


def _experts(cfg: Dict[str, Any]) -> tuple:
    total = int(cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts") or 0)
    active = int(cfg.get("num_experts_per_tok") or cfg.get("num_experts_per_token") or 0)
    return total, active


def weights(model: Path, config: Dict[str, Any]) -> Weights:
    cfg = text_config(config)
    experts, active = _experts(cfg)
    headers = _safetensors_headers(model) if model.is_dir() else []
    if headers:
        total = vision = expert = 0
        dtypes: Dict[str, int] = {}
        for header in headers:
            for name, tensor in header.items():
                if name == "__metadata__":
                    continue
                start, end = tensor["data_offsets"]
                size = end - start
                total += size
                dtypes[tensor["dtype"]] = dtypes.get(tensor["dtype"], 0) + size
                if name.startswith(VISION_PARTS):
                    vision += size
                elif ".experts." in name:
                    expert += size
        per_token = total - vision - (expert - expert * active // experts if experts and active else 0)
        dtype = max(dtypes, key=dtypes.get) if dtypes else "?"
        return Weights(total, per_token, "safetensors", dtype)
    return _weights_from_config(cfg, experts, active)


def _weights_from_config(cfg: Dict[str, Any], experts: int, active: int) -> Weights:
    """An estimate from the architecture when only config.json is at hand (said so in the result)."""
    h, layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    heads, kv = int(cfg["num_attention_heads"]), int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    hd = _head_dim(cfg)
    attention = h * heads * hd * 2 + h * kv * hd * 2
    inter = int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 4 * h) if experts else \
        int(cfg.get("intermediate_size") or 4 * h)
    mlp = 3 * h * inter
    vocab = int(cfg.get("vocab_size", 32000)) * h * (1 if cfg.get("tie_word_embeddings") else 2)
    per_layer = attention + mlp * (experts or 1)
    per_layer_active = attention + mlp * (active or 1) if experts else per_layer
    bytes_ = _dtype_bytes(cfg)
    return Weights(total_bytes=(per_layer * layers + vocab) * bytes_,
                   per_token_bytes=(per_layer_active * layers + vocab) * bytes_, source="config",
                   dtype=str(cfg.get("torch_dtype", "bfloat16")),
                   note="estimated from config.json (no safetensors here): attention + MLP per layer + embeddings")
