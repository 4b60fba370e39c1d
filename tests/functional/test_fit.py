"""`fit` and `probe`: configs written here with the architecture fields as the published ones have them,
safetensors headers written here, and the field report's two validated estimates reproduced."""

from __future__ import annotations

import json
import venv as venv_module
from pathlib import Path

import pytest
from helpers.models import CARD, HYBRID_27B, MLA, MOE_30B_A3B, QWEN3_VL_8B, ROW, SLIDING
from helpers.models import make_model as _model

from ascend_setup.fit.estimate import estimate
from ascend_setup.fit.model_files import ModelFiles, kv_layout, local_files, weights


def test_exact_weight_bytes_from_sharded_headers(tmp_path: Path) -> None:
    model = _model(
        tmp_path / "m",
        QWEN3_VL_8B,
        {
            "model-00001-of-00002.safetensors": {
                "model.language_model.layers.0.mlp.up_proj.weight": ("BF16", 4096),
                "model.visual.blocks.0.attn.qkv.weight": ("BF16", 1000),
            },
            "model-00002-of-00002.safetensors": {"lm_head.weight": ("BF16", 2048), "scale": ("F32", 12)},
        },
    )
    w = weights(local_files(model))
    assert (w.total_bytes, w.source, w.dtype) == (4096 + 1000 + 2048 + 12, "safetensors", "BF16")
    assert w.per_token_bytes == 4096 + 2048 + 12  # the vision tower is not read per decoded token


def test_the_reports_hybrid_27b_needs_64_kib_per_token_and_decodes_at_19(tmp_path: Path) -> None:
    kv = kv_layout(HYBRID_27B, 32768, 2)
    assert kv.per_token_bytes == 64 * 1024 and (kv.full_layers, kv.state_layers) == (16, 48)
    assert kv.state_bytes_per_sequence == 48 * 48 * 128 * 128 * 4  # the DeltaNet state, once per sequence
    # 27e9 bf16 parameters, as its safetensors headers declare (the data itself is not needed)
    model = _model(
        tmp_path / "m", HYBRID_27B, {"model.safetensors": {"model.weight": ("BF16", 54_000_000_000)}}, data=False
    )
    fit = estimate(local_files(model), CARD, ROW, context=32768, utilisation=0.9, kv_dtype="bf16")
    assert fit.decode_tok_s == pytest.approx(19.3, rel=0.07)  # the field report's measurement
    assert fit.decode_tok_s_at_context < fit.decode_tok_s  # 32K tokens of KV and the DeltaNet state, every token
    assert fit.kv_tokens > 0 and fit.weights_source == "safetensors" and not fit.blockers
    assert any("16 full-attention" in line and "64.0 KiB" in line for line in fit.arithmetic)


def test_qwen3_vl_8b_decodes_at_59_and_gets_its_hints(tmp_path: Path) -> None:
    model = _model(tmp_path / "m", QWEN3_VL_8B)
    fit = estimate(local_files(model), CARD, ROW, context=32768, utilisation=0.9, kv_dtype="bf16")
    assert fit.weights_source == "config" and "estimated from config.json" in fit.notes[0]
    # by hand: 8.19e9 text parameters less the input embedding's 151936 x 4096 (one row read per token) = 7.57e9,
    # 15.14 GB in bf16, and 1,024 tokens of 144 KiB KV: 15.29 GB per token; the card's two terms give the 58.9 measured
    assert fit.decode["bytes_per_token"] == pytest.approx(15.14e9 + 1024 * 147456, rel=0.001)
    assert fit.decode_tok_s == pytest.approx(58.9, rel=0.07)
    assert fit.vision_bytes / 2**30 == pytest.approx(1.07, abs=0.01)  # the tower is resident: in the budget
    assert fit.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2  # the text_config's layers only
    assert not fit.env  # a vision model: FlashComm1 off by --additional-config since vllm-ascend 0.20.2rc1
    (config,) = [json.loads(b) for a, b in zip(fit.serve_args, fit.serve_args[1:]) if a == "--additional-config"]
    assert config == {"ascend_compilation_config": {"fuse_qknorm_rope": False}, "enable_flashcomm1": False}  # one flag
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


@pytest.mark.parametrize(
    "fields, blocked",
    [({}, True), ({"o_groups": 8}, True), ({"o_lora_rank": 1024}, True), ({"o_groups": 8, "o_lora_rank": 1024}, False)],
)
def test_fp8_is_refused_unless_the_config_has_what_the_fp8_path_reads(
    tmp_path: Path, fields: dict, blocked: bool
) -> None:
    """0.23.0's FP8 path reads o_groups and o_lora_rank: a DeepSeek-V3 FP8 config (neither) fails at load."""
    model = _model(tmp_path / "ds", {**MLA, "quantization_config": {"quant_method": "fp8"}, **fields})
    fit = estimate(local_files(model), CARD, ROW, context=8192, utilisation=0.9, kv_dtype="bf16")
    assert any("ds_linear" in b for b in fit.blockers) is blocked


def test_fit_command_and_probe_on_cpu_in_a_real_venv(cli, tmp_path: Path) -> None:
    model = _model(tmp_path / "m", HYBRID_27B, {"model.safetensors": {"w": ("BF16", 54_000_000_000)}}, data=False)
    data = json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)
    assert data["bandwidth_source"] == "card-table" and data["kv_bytes_per_token"] == 65536
    assert set(data) >= {
        "model",
        "card",
        "weights_bytes",
        "weights_source",
        "kv_bytes_per_token",
        "kv_layers",
        "state_bytes_per_sequence",
        "kv_tokens",
        "concurrency",
        "decode_tok_s",
        "bandwidth_source",
        "blockers",
        "serve_args",
        "env",
    }
    human = cli("fit", str(model), "--workdir", str(tmp_path / "wd")).stdout
    assert "decode: time per token = t_fixed + bytes per token / (eta x bandwidth)" in human
    assert "decode at 1,024 tokens: " in human and "decode at 32,768 tokens: " in human and "speed: the card's" in human
    venv = tmp_path / "venv"
    venv_module.create(venv, with_pip=False)
    probe = cli(
        "probe", "--venv", str(venv), "--device", "cpu", "--gib", "0.02", "--workdir", str(tmp_path / "wd"), "--json"
    )
    result = json.loads(probe.stdout)
    assert probe.returncode == 0 and result["device"] == "cpu" and result["gbps"] > 0 and result["copies"] == 20
    assert json.loads((tmp_path / "wd" / "probe.json").read_text())["backend"] == result["backend"]
    # a CPU measurement says nothing about HBM: fit keeps the card's figure; an NPU's measurement wins
    assert (
        json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)["bandwidth_source"]
        == "card-table"
    )
    (tmp_path / "wd" / "probe.json").write_text(json.dumps({"device": "npu:0", "gbps": 1267.0}))
    measured = json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)
    assert measured["bandwidth_source"] == "probe" and measured["bandwidth_gbps"] == 1267.0
    flag = json.loads(cli("fit", str(model), "--json", "--bandwidth", "800", "--workdir", str(tmp_path / "wd")).stdout)
    terms = flag["decode"]
    seconds = terms["t_fixed_ms"] / 1000 + terms["bytes_per_token"] / (terms["eta"] * 800e9)
    assert flag["bandwidth_source"] == "flag" and flag["decode_tok_s"] == pytest.approx(1 / seconds, rel=0.01)
