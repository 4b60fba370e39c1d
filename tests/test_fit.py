"""`fit` and `probe`: configs written here with the architecture fields as the published ones have them,
safetensors headers written here, and the field report's two validated estimates reproduced."""

from __future__ import annotations

import json
import struct
import venv as venv_module
from pathlib import Path
from typing import Dict, Optional

import pytest

from ascend_setup.fit.estimate import card_named, estimate
from ascend_setup.fit.model import ModelFiles, kv_layout, local_files, weights
from ascend_setup.fit.safetensors import DTYPE_BYTES
from ascend_setup.matrix import load_matrix

ROW = load_matrix().rows["9.1.0"]
CARD = card_named("910B3")

QWEN3_VL_8B = {  # Qwen3-VL-8B-Instruct's config.json (the fields fit reads)
    "model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"],
    "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "out_hidden_size": 4096,
                      "spatial_merge_size": 2, "patch_size": 16, "temporal_patch_size": 2, "in_channels": 3,
                      "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]},
    "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "num_hidden_layers": 36,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
                    "vocab_size": 151936, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
}
HYBRID_27B = {  # the report's Qwen3.8-27B: 16 of 64 layers full attention (Gated DeltaNet between)
    "model_type": "qwen3_next", "hidden_size": 5120, "num_hidden_layers": 64, "full_attention_interval": 4,
    "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256, "linear_num_value_heads": 48,
    "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_value_head_dim": 128, "intermediate_size": 17408,
    "vocab_size": 151936, "torch_dtype": "bfloat16",
}
MOE_30B_A3B = {  # Qwen3-30B-A3B
    "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
    "moe_intermediate_size": 768, "intermediate_size": 6144, "vocab_size": 151936, "torch_dtype": "bfloat16",
}
MLA = {  # DeepSeek-V2-Lite
    "model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16,
    "num_key_value_heads": 16, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "intermediate_size": 10944, "vocab_size": 102400, "torch_dtype": "bfloat16",
}
SLIDING = {  # gemma-2 style: sliding and global attention alternate
    "model_type": "gemma2", "hidden_size": 3584, "num_hidden_layers": 42, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 4096, "intermediate_size": 14336,
    "layer_types": ["sliding_attention", "full_attention"] * 21, "vocab_size": 256000, "torch_dtype": "bfloat16",
}


def _model(tmp_path: Path, config: dict, shards: Optional[Dict[str, Dict[str, tuple]]] = None,
           data: bool = True) -> Path:
    """A model directory: config.json, and safetensors shards {file: {tensor: (dtype, nbytes)}}."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    weight_map = {}
    for shard, tensors in (shards or {}).items():
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, (dtype, size) in tensors.items():
            header[name] = {"dtype": dtype, "shape": [size // DTYPE_BYTES[dtype]],
                            "data_offsets": [offset, offset + size]}
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


def test_exact_weight_bytes_from_sharded_headers(tmp_path: Path) -> None:
    model = _model(tmp_path / "m", QWEN3_VL_8B, {
        "model-00001-of-00002.safetensors": {"model.language_model.layers.0.mlp.up_proj.weight": ("BF16", 4096),
                                             "model.visual.blocks.0.attn.qkv.weight": ("BF16", 1000)},
        "model-00002-of-00002.safetensors": {"lm_head.weight": ("BF16", 2048), "scale": ("F32", 12)}})
    w = weights(local_files(model))
    assert (w.total_bytes, w.source, w.dtype) == (4096 + 1000 + 2048 + 12, "safetensors", "BF16")
    assert w.per_token_bytes == 4096 + 2048 + 12  # the vision tower is not read per decoded token


def test_the_reports_hybrid_27b_needs_64_kib_per_token_and_decodes_at_18(tmp_path: Path) -> None:
    kv = kv_layout(HYBRID_27B, 32768, 2)
    assert kv.per_token_bytes == 64 * 1024 and (kv.full_layers, kv.state_layers) == (16, 48)
    assert kv.state_bytes_per_sequence == 48 * 48 * 128 * 128 * 4  # the DeltaNet state, once per sequence
    # 27e9 bf16 parameters, as its safetensors headers declare (the data itself is not needed)
    model = _model(tmp_path / "m", HYBRID_27B, {"model.safetensors": {"model.weight": ("BF16", 54_000_000_000)}},
                   data=False)
    fit = estimate(local_files(model), CARD, ROW, context=32768, utilisation=0.9, kv_dtype="bf16")
    assert fit.decode_tok_s == pytest.approx(18, rel=0.07) and fit.decode_tok_s == pytest.approx(19.3, rel=0.08)
    assert fit.kv_tokens > 0 and fit.weights_source == "safetensors" and not fit.blockers
    assert any("16 full-attention" in line and "64.0 KiB" in line for line in fit.arithmetic)


def test_qwen3_vl_8b_decodes_at_58_and_gets_its_hints(tmp_path: Path) -> None:
    model = _model(tmp_path / "m", QWEN3_VL_8B)
    fit = estimate(local_files(model), CARD, ROW, context=32768, utilisation=0.9, kv_dtype="bf16")
    assert fit.weights_source == "config" and "estimated from config.json" in fit.notes[0]
    # by hand: 8.19e9 text parameters less the input embedding's 151936 x 4096 (one row read per token) = 7.57e9,
    # 15.14 GB in bf16: 1490 / 15.14 x 0.65 = 64.0 tok/s, 9% above the 58.9 measured (the report's 58 read the
    # whole embedding every token)
    assert fit.decode_tok_s == pytest.approx(64.0, abs=0.2) and fit.decode_tok_s == pytest.approx(58.9, rel=0.1)
    assert fit.vision_bytes / 2 ** 30 == pytest.approx(1.07, abs=0.01)  # the tower is resident: in the budget
    assert fit.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2  # the text_config's layers only
    assert not fit.env  # a vision model: FlashComm1 off by --additional-config since vllm-ascend 0.20.2rc1
    (config,) = [json.loads(b) for a, b in zip(fit.serve_args, fit.serve_args[1:]) if a == "--additional-config"]
    assert config == {"ascend_fusion_config": {"fuse_qknorm_rope": False}, "enable_flashcomm1": False}  # one flag
    assert any("enable_thinking" in a for a in fit.serve_args)  # Qwen3: thinking off server-side
    assert any("--enforce-eager" in n for n in fit.notes)


def test_moe_decodes_from_its_active_parameters() -> None:
    w = weights(ModelFiles("m", MOE_30B_A3B, [], False, "config"))
    assert 28e9 < w.total_bytes / 2 < 32e9 and 2.5e9 < w.per_token_bytes / 2 < 4.5e9


def test_mla_and_sliding_window_kv() -> None:
    assert kv_layout(MLA, 32768, 2).per_token_bytes == (512 + 64) * 2 * 27
    kv = kv_layout(SLIDING, 32768, 2)
    per_layer = 2 * 8 * 256 * 2
    assert (kv.full_layers, kv.sliding_layers) == (21, 21)
    assert kv.per_token_bytes == pytest.approx(per_layer * (21 + 21 * 4096 / 32768))
    assert kv_layout(SLIDING, 2048, 2).per_token_bytes == per_layer * 42  # below the window: every layer counts


def test_fp8_outside_deepseek_is_a_blocker_and_modelslim_is_the_way(tmp_path: Path) -> None:
    fp8 = _model(tmp_path / "fp8", {**QWEN3_VL_8B, "quantization_config": {"quant_method": "fp8"}})
    fit = estimate(local_files(fp8), CARD, ROW, context=8192, utilisation=0.9, kv_dtype="bf16")
    assert any("ds_linear" in b and "ModelSlim W8A8" in b for b in fit.blockers)
    w8a8 = _model(tmp_path / "w8a8", QWEN3_VL_8B)
    (w8a8 / "quant_model_description.json").write_text("{}")
    fit = estimate(local_files(w8a8), CARD, ROW, context=8192, utilisation=0.9, kv_dtype="bf16")
    assert not fit.blockers and any("ModelSlim" in n for n in fit.notes)


def test_fit_command_and_probe_on_cpu_in_a_real_venv(cli, tmp_path: Path) -> None:
    model = _model(tmp_path / "m", HYBRID_27B, {"model.safetensors": {"w": ("BF16", 54_000_000_000)}}, data=False)
    data = json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)
    assert data["bandwidth_source"] == "card-table" and data["kv_bytes_per_token"] == 65536
    assert set(data) >= {"model", "card", "weights_bytes", "weights_source", "kv_bytes_per_token", "kv_layers",
                         "state_bytes_per_sequence", "kv_tokens", "concurrency", "decode_tok_s", "bandwidth_source",
                         "blockers", "serve_args", "env"}
    human = cli("fit", str(model), "--workdir", str(tmp_path / "wd")).stdout
    assert "decode: 1490 GB/s / 54.00 GB per token x 0.65" in human
    venv = tmp_path / "venv"
    venv_module.create(venv, with_pip=False)
    probe = cli("probe", "--venv", str(venv), "--device", "cpu", "--gib", "0.02", "--workdir", str(tmp_path / "wd"),
                "--json")
    result = json.loads(probe.stdout)
    assert probe.returncode == 0 and result["device"] == "cpu" and result["gbps"] > 0 and result["copies"] == 20
    assert json.loads((tmp_path / "wd" / "probe.json").read_text())["backend"] == result["backend"]
    # a CPU measurement says nothing about HBM: fit keeps the card's figure; an NPU's measurement wins
    assert json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)[
        "bandwidth_source"] == "card-table"
    (tmp_path / "wd" / "probe.json").write_text(json.dumps({"device": "npu:0", "gbps": 1267.0}))
    measured = json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)
    assert measured["bandwidth_source"] == "probe" and measured["bandwidth_gbps"] == 1267.0
    flag = json.loads(cli("fit", str(model), "--json", "--bandwidth", "800", "--workdir", str(tmp_path / "wd")).stdout)
    assert flag["bandwidth_source"] == "flag" and flag["decode_tok_s"] == pytest.approx(800e9 / 54e9 * 0.65, rel=0.01)
