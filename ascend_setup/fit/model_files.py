"""What a model asks of a card, from its config.json and safetensors headers only (no download).

The field report's lesson: a dense-KV, paper-bandwidth estimate said "about 14B" fits a 910B; the
measurement said 27B, because Qwen3.8-27B keeps a growing KV cache in only 16 of its 64 layers (the
rest are Gated DeltaNet with a fixed state). So KV is counted per layer kind:
- full attention (GQA): 2 x KV heads x head_dim x bytes per token;
- MLA (DeepSeek): (kv_lora_rank + qk_rope_head_dim) x bytes per token (one latent for K and V);
- sliding window: as full attention, but never more than the window's tokens;
- linear attention / Gated DeltaNet / Mamba: a fixed state per sequence, not per token.

A decode step reads every weight it uses once, except the input embedding: one row per token. The LM head
(or, with tied embeddings, the embedding matrix acting as it) is read whole.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from pydantic import BaseModel, ConfigDict, ValidationError

from ascend_setup.errors import BadInput
from ascend_setup.fit.config import check_config, complete_from_headers, per_layer, text_config
from ascend_setup.fit.kv_cache import head_dim
from ascend_setup.fit.safetensors import MAX_HEADER, header_length, parse_header
from ascend_setup.utils.inputs import load_json, open_input

CONFIG, INDEX, QUANT = "config.json", "model.safetensors.index.json", "quant_model_description.json"
#: The small files fit reads from a model (locally, or from a hub by name).
SMALL_FILES = (CONFIG, INDEX, QUANT)
CONFIG_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "int8": 1}
FULL = ("full_attention", "attention", "global_attention")
SLIDING = ("sliding_attention", "sliding_window", "local_attention")
LINEAR = ("linear_attention", "mamba", "gated_deltanet", "deltanet", "ssm")
VISION_PARTS = ("visual.", "vision_tower.", "vision_model.", "model.visual.", "image_newline", "multi_modal_projector.")
EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "tok_embeddings.weight")
LM_HEADS = ("lm_head.weight", "output.weight")
#: ModelSlim's quant types name the weight width: W8A8, W8A8_DYNAMIC, W4A8_DYNAMIC, W8A16, W4A16.
QUANT_TYPE = re.compile(r"^W(\d+)A", re.IGNORECASE)
#: Per output row of a quantised linear layer, what ModelSlim stores beside it in fp32 (weight scale and offset,
#: dequant scale, quant bias); below 8 bits, one bf16 scale per group of weights as well.
ROW_SCALE_BYTES, GROUP_SCALE_BYTES, DEFAULT_GROUP = 16, 2, 128


class QuantDescription(BaseModel):
    """ModelSlim's quant_model_description.json: fit reads only the model's quant type."""

    model_config = ConfigDict(extra="allow")

    model_quant_type: Optional[str] = None


@dataclass
class Shard:
    name: str
    size: int  # the whole file's bytes: the header's offsets must lie inside it
    header: Dict[str, Any]


@dataclass
class ModelFiles:
    """What fit reads of a model, wherever it lives: a local directory or a hub's small files and headers."""

    name: str
    config: Dict[str, Any]
    shards: List[Shard]
    quant_description: bool
    origin: str  # where each figure came from, said in the report's header
    has_index: bool = False
    quant_type: str = ""  # ModelSlim's model_quant_type (W8A8, W4A8_DYNAMIC, ...), when its description says


@dataclass
class Weights:
    total_bytes: int
    per_token_bytes: int  # read for every decoded token: no vision tower, only the active experts
    source: str  # safetensors | config
    dtype: str
    note: str = ""
    vision_bytes: int = 0


@dataclass
class KvLayout:
    per_token_bytes: float  # at the given context (sliding layers averaged over it)
    full_layers: int
    sliding_layers: int
    state_layers: int
    state_bytes_per_sequence: int
    kinds: Dict[str, int] = field(default_factory=dict)


def read_small_json(path: Path, what: str, kind: str = "config") -> Any:
    """A model's small JSON file (config, index, quant description) through the one input checker."""
    return load_json(path, kind, what=f"{what} {path}")


def config_path(model: Path) -> Path:
    path = model / CONFIG if model.is_dir() else model
    if not path.exists() and not path.is_symlink():
        raise BadInput(f"MODEL {model}: no config.json there", hint="give a model directory or its config.json")
    return path


def load_config(model: Path) -> Dict[str, Any]:
    path = config_path(model)
    return check_config(read_small_json(path, "MODEL"), f"MODEL {path}")


def shard_names(index: Any, what: str) -> List[str]:
    """The shards an index's weight_map names, in order."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise BadInput(f"{what}: no weight_map of tensor -> shard file")
    names = sorted(set(weight_map.values()))
    if any(n.startswith("/") or ".." in Path(n).parts for n in names):
        raise BadInput(f"{what}: a shard name leaves the model directory")
    return names


def read_local_header(path: Path) -> Shard:
    try:
        with open_input(path, "safetensors", what=f"shard {path}") as handle:
            size = os.fstat(handle.fileno()).st_size
            length = header_length(str(path), handle.read(8), size)
            blob = handle.read(min(length, MAX_HEADER))
    except OSError as exc:
        raise BadInput(f"shard {path} cannot be read ({exc.strerror or exc})") from None
    return Shard(path.name, size, parse_header(str(path), blob, size))


def local_files(model: Path) -> ModelFiles:
    """A model directory (or a bare config.json): config, quant description, every shard's header."""
    if not model.is_dir():
        config = load_config(model)
        return ModelFiles(str(model), config, [], False, f"config.json at {model} (no safetensors beside it)")
    path = config_path(model)
    raw = check_config(read_small_json(path, "MODEL"), f"MODEL {path}", headers_follow=True)
    index = model / INDEX
    if index.exists():
        names = shard_names(read_small_json(index, "index", kind="index"), f"index {index}")
        missing = [n for n in names if not (model / n).exists()]
        if missing:
            raise BadInput(
                f"MODEL {model}: partial download: {len(names) - len(missing)} of {len(names)} shards "
                f"(missing {missing[0]}{' and more' if len(missing) > 1 else ''})",
                hint="finish the download (ascend-setup model fetch resumes it), or fit the model by id",
            )
        paths = [model / n for n in names]
    else:
        paths = sorted(p for p in model.glob("*.safetensors"))
    shards = [read_local_header(p) for p in paths]
    config, filled = complete_from_headers(raw, [s.header for s in shards])
    check_config(config, f"MODEL {path}", headers_read=bool(shards))
    origin = (
        f"local directory {model}: config.json"
        + (f", {len(shards)} safetensors headers" if shards else "")
        + (f" ({', '.join(filled)} from the headers' tensor shapes)" if filled else "")
    )
    described = (model / QUANT).is_file()
    return ModelFiles(
        str(model),
        config,
        shards,
        described,
        origin,
        has_index=index.exists(),
        quant_type=quant_type(model / QUANT) if described else "",
    )


def quant_type(path: Path) -> str:
    """The model_quant_type of a ModelSlim description ('' when it names none)."""
    data = read_small_json(path, "quant description")
    try:
        return QuantDescription.model_validate(data).model_quant_type or ""
    except ValidationError:
        raise BadInput(
            f"quant description {path}: not a JSON object with a string model_quant_type",
            hint="ModelSlim writes it beside the weights; fetch it again",
        ) from None


def dtype_bytes(config: Dict[str, Any]) -> int:
    return CONFIG_DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"), 2)


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
        return heads * int(cfg.get("linear_key_head_dim") or 128) * int(cfg.get("linear_value_head_dim") or 128) * 4
    if cfg.get("mamba_d_state") or cfg.get("state_size"):
        d_inner = int(cfg.get("mamba_expand") or cfg.get("expand") or 2) * int(cfg["hidden_size"])
        return d_inner * int(cfg.get("mamba_d_state") or cfg["state_size"]) * 4
    return 0


def kv_layout(config: Dict[str, Any], context: int, kv_bytes: int) -> KvLayout:
    cfg = text_config(config)
    kinds = layer_kinds(cfg)
    if cfg.get("kv_lora_rank"):  # MLA: one compressed latent per token and layer
        layer_bytes = (int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 64)) * kv_bytes
    else:
        layer_bytes = 2 * int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"]) * head_dim(cfg) * kv_bytes
    window = int(cfg.get("sliding_window") or 0)
    sliding_share = min(1.0, window / context) if window and context else 1.0
    full, sliding, state = kinds.count("full"), kinds.count("sliding"), kinds.count("state")
    return KvLayout(
        per_token_bytes=layer_bytes * (full + sliding * sliding_share),
        full_layers=full,
        sliding_layers=sliding,
        state_layers=state,
        state_bytes_per_sequence=state * state_bytes_per_layer(cfg),
        kinds={"full": full, "sliding": sliding, "state": state},
    )


def experts_of(cfg: Dict[str, Any]) -> Tuple[int, int]:
    total = int(cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts") or 0)
    active = int(cfg.get("num_experts_per_tok") or cfg.get("num_experts_per_token") or 0)  # moe_topk: config.py
    return total, active


def weights(files: ModelFiles) -> Weights:
    cfg = text_config(files.config)
    experts, active = experts_of(cfg)
    if files.shards:
        return _weights_from_headers(files.shards, experts, active)
    w = _weights_from_config(cfg, experts, active, files.quant_type)
    w.vision_bytes = vision_params(files.config) * dtype_bytes(cfg)
    w.total_bytes += w.vision_bytes
    if w.vision_bytes:
        w.note += "; the vision tower (estimated from vision_config) is resident but not read per token"
    return w


def _weights_from_headers(shards: List[Shard], experts: int, active: int) -> Weights:
    total = vision = expert = embedding = embedding_row = 0
    has_lm_head = False
    dtypes: Dict[str, int] = {}
    for shard in shards:
        for name, tensor in shard.header.items():
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
            elif name.endswith(EMBEDDINGS) and len(tensor["shape"]) == 2:
                embedding += size
                embedding_row += size // tensor["shape"][0]
            has_lm_head = has_lm_head or name.endswith(LM_HEADS)
    unused_experts = expert - expert * active // experts if experts and active else 0
    # one row of the input embedding per token; tied (no LM head stored): the matrix is the LM head, read whole
    unread_embedding = embedding - embedding_row if has_lm_head else 0
    per_token = total - vision - unused_experts - unread_embedding
    dtype = max(dtypes, key=lambda d: dtypes[d]) if dtypes else "?"
    return Weights(total, per_token, "safetensors", dtype, vision_bytes=vision)


def _attention_params(cfg: Dict[str, Any]) -> int:
    h, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    if cfg.get("kv_lora_rank"):  # MLA: q (optionally low-rank), the joint KV latent, its up-projection, o
        nope, rope = int(cfg.get("qk_nope_head_dim") or 128), int(cfg.get("qk_rope_head_dim") or 64)
        v, rank = int(cfg.get("v_head_dim") or 128), int(cfg["kv_lora_rank"])
        q_rank = cfg.get("q_lora_rank")
        q = h * q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
        return q + h * (rank + rope) + rank * heads * (nope + v) + heads * v * h
    kv, hd = int(cfg.get("num_key_value_heads") or heads), head_dim(cfg)
    return h * heads * hd * 2 + h * kv * hd * 2


def linear_width(cfg: Dict[str, Any], quant: str) -> Tuple[float, int, str]:
    """(bytes per weight of the linear layers, group size or 0, what said so): ModelSlim's quant type, else the
    config's quantization_config (fp8, or GPTQ/AWQ-style bits), else the dtype."""
    found = QUANT_TYPE.match(quant)
    given = cfg.get("quantization_config")
    q: Dict[str, Any] = given if isinstance(given, dict) else {}
    bits = (
        int(found.group(1))
        if found
        else 8
        if str(q.get("quant_method", "")).lower() == "fp8"
        else q.get("bits") or q.get("weight_bits")
    )
    if not isinstance(bits, int) or not 1 <= bits <= 16:
        return dtype_bytes(cfg), 0, ""
    group = int(q.get("group_size") or DEFAULT_GROUP) if bits < 8 else 0
    return bits / 8, max(group, 0), quant or f"quantization_config {bits}-bit"


def _weights_from_config(cfg: Dict[str, Any], experts: int, active: int, quant: str = "") -> Weights:
    """An estimate from the architecture when only config.json is at hand (said so in the result).
    MoE: routed experts (only the active ones read), shared experts and dense first layers (DeepSeek's
    n_shared_experts, first_k_dense_replace) always read. Quantised: the linear layers at their width with
    their scales, the embeddings and LM head at the dtype (ModelSlim keeps them unquantised)."""
    h, layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    attention = _attention_params(cfg)
    dense_mlp = 3 * h * int(cfg.get("intermediate_size") or 4 * h)
    if experts:
        dense_layers = min(layers, int(cfg.get("first_k_dense_replace") or 0))
        body = body_read = dense_layers * (attention + dense_mlp)
        inter = per_layer(cfg, "moe_intermediate_size", layers, int(cfg.get("intermediate_size") or 4 * h))
        topk = per_layer(cfg, "moe_topk", layers, active or experts)
        shared_mlps = per_layer(cfg, "num_shared_expert", layers)  # Hunyuan: MLPs of intermediate_size
        for i in range(dense_layers, layers):
            expert = 3 * h * inter[i]
            shared = (
                int(cfg.get("n_shared_experts") or 0) * expert
                + shared_mlps[i] * dense_mlp
                + 3 * h * int(cfg.get("shared_expert_intermediate_size") or 0)
            )
            body += attention + experts * expert + shared
            body_read += attention + topk[i] * expert + shared
    else:
        body = body_read = layers * (attention + dense_mlp)
    vocab = int(cfg.get("vocab_size") or 32000) * h
    tied = bool(cfg.get("tie_word_embeddings"))
    bytes_ = dtype_bytes(cfg)
    width, group, quantised = linear_width(cfg, quant)

    def linear(params: int) -> int:
        scales = params // h * ROW_SCALE_BYTES + (params // group * GROUP_SCALE_BYTES if group else 0)
        return int(params * width) + (scales if quantised else 0)

    note = "estimated from config.json (no safetensors here): attention + MLP per layer + embeddings"
    if quantised:
        note += (
            f"; {quantised}: linear layers at {width:g} byte per weight plus scales ({ROW_SCALE_BYTES} bytes per "
            "row" + (f", {GROUP_SCALE_BYTES} per group of {group}" if group else "") + "), embeddings at the dtype"
        )
    return Weights(
        total_bytes=linear(body) + vocab * (1 if tied else 2) * bytes_,
        per_token_bytes=linear(body_read) + (vocab + h) * bytes_,  # the LM head whole, one embedding row
        source="config",
        dtype=quantised or str(cfg.get("torch_dtype") or "bfloat16"),
        note=note,
    )


def vision_params(config: Dict[str, Any]) -> int:
    """A ViT tower from vision_config: blocks (attention 4h^2 + MLP 2h x inter), patch and position
    embeddings, and the patch mergers (one, plus one per deepstack layer in Qwen3-VL)."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict) or not vc.get("depth") or not vc.get("hidden_size"):
        return 0
    h, depth = int(vc["hidden_size"]), int(vc["depth"])
    inter = int(vc.get("intermediate_size") or 4 * h)
    blocks = depth * (4 * h * h + 2 * h * inter)
    patch = (
        int(vc.get("in_channels") or 3)
        * int(vc.get("temporal_patch_size") or 1)
        * int(vc.get("patch_size") or 14) ** 2
        * h
    )
    merged = h * int(vc.get("spatial_merge_size") or 2) ** 2
    out = int(vc.get("out_hidden_size") or text_config(config)["hidden_size"])
    mergers = (1 + len(vc.get("deepstack_visual_indexes") or [])) * (merged * merged + merged * out)
    return blocks + patch + int(vc.get("num_position_embeddings") or 0) * h + mergers
