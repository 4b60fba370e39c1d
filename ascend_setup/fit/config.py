"""config.json, checked before any figure is drawn from it (pydantic: the fields fit uses, typed).

A layer count of -36 gave -85 tok/s, a full_attention_interval of 0 was read as "all full", and a missing
hidden_size was a KeyError traceback: each is now one line naming the field. So is a layer count of 10**9
(fit builds a list per layer: it exhausted memory) and a quantization_config that is not an object.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from typing_extensions import Annotated

from ascend_setup.errors import BadInput

#: Far above any real model (the largest have about 130 layers), far below what a list per layer can hold.
MAX_LAYERS = 4096
#: Sizes and counts: a million-token context or vocabulary fits, a figure no card could hold does not.
MAX_FIGURE = 1 << 31

Positive = Annotated[int, Field(strict=True, gt=0, le=MAX_FIGURE)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_FIGURE)]
Layers = Annotated[int, Field(strict=True, gt=0, le=MAX_LAYERS)]
#: A short word of the config (a layer kind, a dtype, a model type, a quantisation method).
Word = Annotated[str, StringConstraints(strict=True, max_length=64)]


class QuantizationConfig(BaseModel):
    """quantization_config: fit reads its quant_method (fp8 weights are one byte wide); the rest is kept."""

    model_config = ConfigDict(extra="allow")

    quant_method: Optional[Word] = None


class VisionConfig(BaseModel):
    """A vision tower's size (Qwen-VL style names); all optional, the estimate says what it assumed."""

    model_config = ConfigDict(extra="allow")

    depth: Optional[Layers] = None
    hidden_size: Optional[Positive] = None
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
    moe_intermediate_size: Optional[Positive] = None
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
    n_shared_experts: Optional[Count] = None
    first_k_dense_replace: Optional[Count] = None
    tie_word_embeddings: Optional[bool] = None
    model_type: Optional[Word] = None
    torch_dtype: Optional[Word] = None
    dtype: Optional[Word] = None
    quantization_config: Optional[QuantizationConfig] = None
    vision_config: Optional[VisionConfig] = None  # a string here was skipped without a word


def text_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """The language model's part of a multimodal config (text_config / llm_config), else the config."""
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict):
            return {**config, **config[key]}
    return config


def check_config(config: Any, what: str) -> Dict[str, Any]:
    """A transformer's config.json whose figures can be believed, or BadInput naming the first bad field."""
    if not isinstance(config, dict):
        raise BadInput(f"{what} is not a JSON object")
    try:
        TextConfig.model_validate(text_config(config))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "?"
        raise BadInput(f"{what}: {field}: {first['msg'].lower()}",
                       hint="not a transformer config fit can read (layer and head counts are positive integers)"
                       ) from None
    return config
