"""config.json, checked before any figure is drawn from it (pydantic: the fields fit uses, typed).

A layer count of -36 gave -85 tok/s, a full_attention_interval of 0 was read as "all full", and a missing
hidden_size was a KeyError traceback: each is now one line naming the field. So is a layer count of 10**9
(fit builds a list per layer: it exhausted memory) and a quantization_config that is not an object.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from typing_extensions import Annotated

from ascend_setup.errors import BadInput
from ascend_setup.fit.header_dims import dims_from_headers

#: Far above any real model (the largest have about 130 layers), far below what a list per layer can hold.
MAX_LAYERS = 4096
#: Sizes and counts: a million-token context or vocabulary fits, a figure no card could hold does not.
MAX_FIGURE = 1 << 31

Positive = Annotated[int, Field(strict=True, gt=0, le=MAX_FIGURE)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_FIGURE)]
Layers = Annotated[int, Field(strict=True, gt=0, le=MAX_LAYERS)]
#: A short word of the config (a layer kind, a dtype, a model type, a quantisation method).
Word = Annotated[str, StringConstraints(strict=True, max_length=64)]
#: A figure given once, or once per layer (Hunyuan-A13B's moe_intermediate_size, moe_topk, num_shared_expert).
PerLayer = Union[Positive, Annotated[List[Positive], Field(min_length=1, max_length=MAX_LAYERS)]]
PerLayerCount = Union[Count, Annotated[List[Count], Field(min_length=1, max_length=MAX_LAYERS)]]
#: Where a multimodal or speech model keeps its language model (Qwen2.5-Omni: thinker_config.text_config).
NESTED = ("thinker_config", "text_config", "llm_config", "language_config")


class QuantizationConfig(BaseModel):
    """quantization_config: fit reads its quant_method (fp8 weights are one byte wide); the rest is kept."""

    model_config = ConfigDict(extra="allow")

    quant_method: Optional[Word] = None


class VisionConfig(BaseModel):
    """A vision tower's size (Qwen-VL style names); all optional, the estimate says what it assumed."""

    model_config = ConfigDict(extra="allow")

    depth: Optional[Layers] = None
    hidden_size: Optional[Positive] = None
    num_heads: Optional[Positive] = None
    intermediate_size: Optional[Positive] = None
    out_hidden_size: Optional[Positive] = None
    spatial_merge_size: Optional[Positive] = None
    patch_size: Optional[Positive] = None
    temporal_patch_size: Optional[Positive] = None
    in_channels: Optional[Positive] = None
    num_position_embeddings: Optional[Count] = None
    deepstack_visual_indexes: Optional[List[Count]] = Field(default=None, max_length=MAX_LAYERS)


class TextConfig(BaseModel):
    """The language model's fields that fit reads; every other key is kept as it is."""

    model_config = ConfigDict(extra="allow")

    num_hidden_layers: Layers
    hidden_size: Positive
    num_attention_heads: Positive
    num_key_value_heads: Optional[Positive] = None
    head_dim: Optional[Positive] = None
    intermediate_size: Optional[Positive] = None
    moe_intermediate_size: Optional[PerLayer] = None  # Hunyuan: one per layer
    shared_expert_intermediate_size: Optional[Count] = None
    vocab_size: Optional[Positive] = None
    max_position_embeddings: Optional[Positive] = None
    kv_lora_rank: Optional[Positive] = None
    q_lora_rank: Optional[Positive] = None
    qk_rope_head_dim: Optional[Positive] = None
    qk_nope_head_dim: Optional[Positive] = None
    v_head_dim: Optional[Positive] = None
    sliding_window: Optional[Count] = None
    max_window_layers: Optional[Count] = None
    full_attention_interval: Optional[Positive] = None
    layer_types: Optional[List[Word]] = Field(default=None, max_length=MAX_LAYERS)
    layers_block_type: Optional[List[Word]] = Field(default=None, max_length=MAX_LAYERS)
    linear_num_value_heads: Optional[Positive] = None
    linear_key_head_dim: Optional[Positive] = None
    linear_value_head_dim: Optional[Positive] = None
    mamba_d_state: Optional[Positive] = None
    state_size: Optional[Positive] = None
    mamba_expand: Optional[Positive] = None
    expand: Optional[Positive] = None
    num_experts: Optional[Count] = None
    n_routed_experts: Optional[Count] = None
    num_local_experts: Optional[Count] = None
    num_experts_per_tok: Optional[Count] = None
    moe_topk: Optional[PerLayerCount] = None  # Hunyuan's num_experts_per_tok, per layer
    n_shared_experts: Optional[Count] = None
    num_shared_expert: Optional[PerLayerCount] = None  # Hunyuan: shared MLPs of intermediate_size, per layer
    attention_head_dim: Optional[Positive] = None  # Hunyuan's head_dim
    first_k_dense_replace: Optional[Count] = None
    tie_word_embeddings: Optional[bool] = None
    model_type: Optional[Word] = None
    torch_dtype: Optional[Word] = None
    dtype: Optional[Word] = None
    quantization_config: Optional[QuantizationConfig] = None
    vision_config: Optional[VisionConfig] = None  # a string here was skipped without a word


def text_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """The language model's part of a config: text_config / llm_config / language_config, inside a thinker_config
    for an omni model (vLLM serves the thinker), merged over the outer keys; else the config."""
    for key in NESTED:
        if isinstance(config.get(key), dict):
            inner = text_config(config[key])
            return _aliases({**config, **inner})
    return _aliases(config)


def _aliases(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Other spellings of a field fit reads: Hunyuan's attention_head_dim and moe_topk."""
    extra = {}
    if cfg.get("head_dim") is None and cfg.get("attention_head_dim") is not None:
        extra["head_dim"] = cfg["attention_head_dim"]
    if cfg.get("num_experts_per_tok") is None and cfg.get("moe_topk") is not None:
        topk = cfg["moe_topk"]
        extra["num_experts_per_tok"] = max(topk) if isinstance(topk, list) and topk else topk
    return {**cfg, **extra} if extra else cfg


def per_layer(cfg: Dict[str, Any], key: str, layers: int, default: int = 0) -> List[int]:
    """One figure per layer from a field given once or as a list (a short list repeats its last entry)."""
    value = cfg.get(key)
    if isinstance(value, list) and value:
        return [int(value[min(i, len(value) - 1)]) for i in range(layers)]
    return [int(value or default)] * layers


def _missing_state_size(cfg: Dict[str, Any]) -> List[str]:
    """A hybrid's linear-attention state size, named with the other missing fields so that one line names them
    all: a config that declares linear-attention or Mamba layers (full_attention_interval, layer_types,
    layers_block_type) with neither linear_num_value_heads nor mamba_d_state / state_size."""
    lists = [cfg.get(key) for key in ("layer_types", "layers_block_type")]
    types = [str(t).lower() for given in lists if isinstance(given, list) for t in given]
    hybrid = bool(cfg.get("full_attention_interval")) or any(
        w in t for t in types for w in ("linear", "mamba", "deltanet", "ssm")
    )
    if hybrid and not any(cfg.get(k) for k in ("linear_num_value_heads", "mamba_d_state", "state_size")):
        return ["linear_num_value_heads (or mamba_d_state)"]
    return []


def complete_from_headers(config: Dict[str, Any], headers: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], List[str]]:
    """The config with the dimensions it lacks read off its safetensors headers (header_dims.py), and their names;
    the config's own fields are kept as they are."""
    if not isinstance(config, dict) or not headers:
        return config, []
    filled = dims_from_headers(text_config(config), headers)
    return ({**config, **filled}, sorted(filled)) if filled else (config, [])


def check_config(config: Any, what: str, headers_read: bool = False, headers_follow: bool = False) -> Dict[str, Any]:
    """A transformer's config.json whose figures can be believed, or BadInput naming the first bad field.

    headers_read: the model's safetensors headers were read and completed it (the line then says they did not
    give what is still missing); headers_follow: they are yet to be read, so a missing field is not refused yet.
    """
    if not isinstance(config, dict):
        raise BadInput(f"{what} is not a JSON object")
    try:
        TextConfig.model_validate(text_config(config))
    except ValidationError as exc:
        missing = [".".join(str(p) for p in e["loc"]) for e in exc.errors() if e["type"] == "missing"]
        if missing and headers_follow and len(missing) == len(exc.errors()):
            return config
        if missing:
            missing += _missing_state_size(text_config(config))
            raise BadInput(
                f"{what}: no estimate: the config lacks {', '.join(missing)}"
                + (" (its safetensors headers do not show them either)" if headers_read else ""),
                hint="fit needs the language model's layer count, hidden size and attention heads "
                "(give the model's full config.json)",
            ) from None
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "?"
        raise BadInput(
            f"{what}: {field}: {first['msg'].lower()}",
            hint="not a transformer config fit can read (layer and head counts are positive integers)",
        ) from None
    return config
