"""fit's estimate gaps, each with the figure worked out by hand, and the inputs fit must not believe:
lying or broken safetensors headers, impossible configs, bad probe results, partial downloads."""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Optional

import pytest
from helpers.cli import assert_one_line_error
from helpers.models import CARD, DEEPSEEK_V2_LITE, DENSE, MLA, MOE_30B_A3B, QWEN3_VL_8B, ROW
from helpers.models import make_model as _model

from ascend_setup.errors import BadInput
from ascend_setup.fit.cards import card_for
from ascend_setup.fit.estimate import estimate
from ascend_setup.fit.model_files import ModelFiles, local_files, weights


def _config_only(config: dict) -> ModelFiles:
    return ModelFiles("m", config, [], False, "config")


def _fit(config: dict, **kw):
    return estimate(
        _config_only(config),
        kw.pop("card", CARD),
        ROW,
        context=kw.pop("context", 32768),
        utilisation=0.9,
        kv_dtype="bf16",
        **kw,
    )


def test_the_input_embedding_is_one_row_per_token_and_a_tied_one_is_the_lm_head(tmp_path: Path) -> None:
    untied = _model(
        tmp_path / "u",
        DENSE,
        {
            "model.safetensors": {
                "model.embed_tokens.weight": ("BF16", 1000 * 64 * 2),
                "lm_head.weight": ("BF16", 1000 * 64 * 2),
                "model.layers.0.w": ("BF16", 5000),
            }
        },
    )
    w = weights(local_files(untied))
    assert w.total_bytes == 128000 * 2 + 5000  # a 1-D "embedding" is not taken for a matrix: all read
    header = {
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [1000, 64], "data_offsets": [0, 128000]},
        "lm_head.weight": {"dtype": "BF16", "shape": [1000, 64], "data_offsets": [128000, 256000]},
    }
    _write(untied / "model.safetensors", header, 256000)
    w = weights(local_files(untied))
    assert (w.total_bytes, w.per_token_bytes) == (256000, 128000 + 128)  # the LM head, and one 64 x 2-byte row
    del header["lm_head.weight"]
    _write(untied / "model.safetensors", header, 128000)
    w = weights(local_files(untied))
    assert w.per_token_bytes == 128000  # tied: the embedding matrix is the LM head, read whole
    # Qwen3-30B-A3B from its config: 6.71 GB/token when the embedding was read whole, 6.08 by hand
    assert weights(_config_only(MOE_30B_A3B)).per_token_bytes / 1e9 == pytest.approx(6.08, rel=0.01)


def _write(path: Path, header: dict, data: int) -> None:
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * data)


def test_deepseek_shared_experts_and_dense_first_layers_count() -> None:
    w = weights(_config_only(DEEPSEEK_V2_LITE))
    # by hand: MLA attention 13.76M, 26 MoE layers x (6 routed + 2 shared) x 8.65M, 1 dense layer 67.2M,
    # the LM head 0.21B and one embedding row: 2.45B active (published 2.4B, was 2.27B); 15.7B total
    assert w.per_token_bytes / 2 / 1e9 == pytest.approx(2.4, rel=0.03)
    assert w.total_bytes / 2 / 1e9 == pytest.approx(15.7, rel=0.01)


def test_the_vision_tower_is_in_the_hbm_budget() -> None:
    with_tower, text_only = _fit(QWEN3_VL_8B), _fit({k: v for k, v in QWEN3_VL_8B.items() if k != "vision_config"})
    assert with_tower.vision_bytes / 2**30 == pytest.approx(1.1, abs=0.05)  # Qwen3-VL-8B's tower, by hand 1.07
    assert with_tower.weights_bytes - text_only.weights_bytes == with_tower.vision_bytes
    assert with_tower.kv_tokens < text_only.kv_tokens and with_tower.decode_tok_s == text_only.decode_tok_s


def test_context_beyond_max_position_embeddings_warns() -> None:
    assert not _fit(DENSE, context=32768).warnings
    assert "max_position_embeddings 40,960" in _fit(DENSE, context=65536).warnings[0]


def test_a_model_that_does_not_fit_says_so_and_gives_no_speed(cli, tmp_path: Path) -> None:
    big = {**DENSE, "num_hidden_layers": 400}
    fit = _fit(big)
    assert not fit.fits and fit.decode_tok_s is None and "does not fit" in fit.headline and "tok/s" not in fit.headline
    model = _model(tmp_path / "big", big)
    out = cli("fit", str(model), "--workdir", str(tmp_path / "wd"))
    assert out.returncode == 1 and "does not fit" in out.stdout and "tok/s" not in out.stdout


def test_any_card_with_its_figures_labelled(cli, tmp_path: Path) -> None:
    card = card_for("310P", 24, 204.8)
    assert (card.hbm_gib, card.peak_gbps) == (24, 204.8) and "given: --hbm-gib 24 --bandwidth 204.8" in card.source
    model = _model(tmp_path / "m", DENSE)
    out = json.loads(
        cli(
            "fit",
            str(model),
            "--card",
            "310P",
            "--hbm-gib",
            "24",
            "--bandwidth",
            "204.8",
            "--json",
            "--workdir",
            str(tmp_path / "wd"),
        ).stdout
    )
    assert out["card"] == "310P" and "given" in out["card_source"] and out["bandwidth_gbps"] == 204.8
    assert_one_line_error(cli("fit", str(model), "--card", "910C", "--workdir", str(tmp_path / "wd")))


def test_tp_divides_weights_and_kv_per_card_and_states_its_assumption(cli, tmp_path: Path) -> None:
    one, two = _fit(DENSE), _fit(DENSE, tp=2)
    assert two.weights_per_card_bytes == pytest.approx(one.weights_bytes / 2, abs=1)
    assert two.kv_bytes_per_token == one.kv_bytes_per_token / 2  # 8 KV heads over 2 cards
    # half the bytes per card, but the multi-card fixed cost in place of the single card's
    assert two.decode["bytes_per_token"] == pytest.approx(one.decode["bytes_per_token"] / 2, rel=0.01)
    assert two.decode["t_fixed_ms"] == CARD.decode.t_fixed_ms_multi_card > one.decode["t_fixed_ms"]
    assert two.decode["bandwidth_ms"] == pytest.approx(one.decode["bandwidth_ms"] / 2, rel=0.01)
    assert any("all-reduces" in n and "upper bound" in n and "HCCL buffers on each" in n for n in two.notes)
    assert _fit(DENSE, tp=16).kv_bytes_per_token == one.kv_bytes_per_token / 8  # fewer heads than cards: replicated
    assert _fit(MLA, tp=4).kv_bytes_per_token == _fit(MLA).kv_bytes_per_token  # an MLA latent is whole on each card
    model = _model(tmp_path / "m", DENSE)
    assert_one_line_error(cli("fit", str(model), "--tp", "3", "--workdir", str(tmp_path / "wd")))


def _shard(path: Path, header, data: bytes = b"", raw: Optional[bytes] = None) -> None:
    blob = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)


OK_TENSOR = {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}


def _bad_models(t: Path) -> dict:
    """name -> a model directory that fit must refuse with one line."""
    cases = {}

    def model(name: str, config=DENSE, header=None, data=b"\0" * 8, raw=None, extra=None) -> None:
        d = t / name
        d.mkdir()
        (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
        if header is not None or raw is not None:
            _shard(d / "model.safetensors", header, data, raw)
        for file, text in (extra or {}).items():
            (d / file).write_text(text)
        cases[name] = d

    model(
        "header-claims-32-GB",
        header={"w": {"dtype": "BF16", "shape": [16_000_000_000], "data_offsets": [0, 32_000_000_000]}},
        data=b"\0" * 60,
    )
    model("reversed-offsets", header={"w": {"dtype": "BF16", "shape": [4], "data_offsets": [8, 0]}})
    model("negative-layers", config={**DENSE, "num_hidden_layers": -36})
    model("interval-zero", config={**DENSE, "full_attention_interval": 0})
    model("no-hidden-size", config={k: v for k, v in DENSE.items() if k != "hidden_size"})
    model("zero-heads", config={**DENSE, "num_attention_heads": 0})
    model("layers-as-string", config={**DENSE, "num_hidden_layers": "36"})
    model("config-a-list", config="[1, 2]")
    model("config-not-json", config="{nope")
    model("config-deep", config="[" * 100_000 + "]" * 100_000)
    model("header-truncated", raw=b"", data=b"")
    (t / "header-truncated" / "model.safetensors").write_bytes(b"\x01\x02\x03")
    model("header-not-json", raw=b"{not json", data=b"")
    model("header-a-list", raw=b"[1, 2, 3]", data=b"")
    model("header-deep", raw=b"[" * 100_000 + b"]" * 100_000, data=b"")
    model("no-data-offsets", header={"w": {"dtype": "BF16", "shape": [4]}})
    model("unknown-dtype", header={"w": {"dtype": "Q4", "shape": [4], "data_offsets": [0, 8]}})
    model("zero-shape", header={"w": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [0, 0]}})
    model("shape-disagrees", header={"w": {"dtype": "BF16", "shape": [400], "data_offsets": [0, 8]}})
    model("index-not-json", header={"w": OK_TENSOR}, extra={"model.safetensors.index.json": "{nope"})
    model(
        "index-weight-map-list", header={"w": OK_TENSOR}, extra={"model.safetensors.index.json": '{"weight_map": []}'}
    )
    model(
        "partial-download",
        extra={
            "model.safetensors.index.json": json.dumps(
                {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
            )
        },
    )
    _shard(t / "partial-download" / "model-00001-of-00002.safetensors", {"a": OK_TENSOR}, b"\0" * 8)
    model("hy3-no-fields", config={"_stated_total_params": 295e9, "model_type": "hy3"})
    model("hybrid-no-state-sizes", config={**DENSE, "full_attention_interval": 4})
    # the referee's partial Qwen3.8-27B: a hybrid that lacks its core fields and its state size at once
    model(
        "hybrid-partial",
        config={
            "text_config": {
                "num_hidden_layers": 64,
                "full_attention_interval": 4,
                "num_key_value_heads": 4,
                "head_dim": 256,
            }
        },
    )
    model("per-layer-list-of-strings", config={**DENSE, "num_experts": 8, "moe_intermediate_size": ["3072"] * 36})
    model("fifo-shard")
    os.mkfifo(t / "fifo-shard" / "model.safetensors")
    return cases


def test_fit_believes_no_lying_or_broken_input(cli, tmp_path: Path) -> None:
    cases = _bad_models(tmp_path)
    lines = {}
    for name, model in cases.items():
        lines[name] = assert_one_line_error(cli("fit", str(model), "--workdir", str(tmp_path / "wd"), timeout=60))
    print(f"{len(cases)} bad models refused with one line each")
    assert len(cases) >= 20
    assert "partial download: 1 of 2 shards" in lines["partial-download"]
    assert "32000000000 do not lie in the file" in lines["header-claims-32-GB"]
    assert "num_hidden_layers" in lines["negative-layers"] and "full_attention_interval" in lines["interval-zero"]
    assert "a FIFO, not a regular file" in lines["fifo-shard"]
    # a config nobody can estimate names every field it lacks, on one line
    assert "no estimate: the config lacks num_hidden_layers, hidden_size, num_attention_heads" in lines["hy3-no-fields"]
    assert "no estimate: linear-attention layers without their state sizes" in lines["hybrid-no-state-sizes"]
    assert (
        "the config lacks hidden_size, num_attention_heads, linear_num_value_heads (or mamba_d_state) ("
        in lines["hybrid-partial"]
    )


@pytest.mark.parametrize("total", ["-5", "0", "\"big\"", "true"])
def test_a_probed_device_memory_that_is_not_a_size_is_refused(cli, tmp_path: Path, total: str) -> None:
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / "probe.json").write_text('{"device": "npu:0", "gbps": 1267, "total_memory": %s}' % total)
    line = assert_one_line_error(cli("fit", str(_model(tmp_path / "m", DENSE)), "--workdir", str(tmp_path / "wd")))
    assert "total_memory" in line and "is not a memory size in bytes" in line


def test_fit_prefers_this_hosts_device_memory(cli, tmp_path: Path) -> None:
    """probe records torch_npu's total memory; fit budgets from it instead of the card table's 60.96 GiB."""
    model = _model(tmp_path / "m", DENSE)
    table = json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "none")).stdout)
    assert table["device_memory_bytes"] == 65452113920 and "#6250" in table["device_memory_source"]
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / "probe.json").write_text(
        json.dumps({"device": "npu:0", "gbps": 1267, "total_memory": 61 * 2**30})
    )
    host = json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)
    assert host["device_memory_bytes"] == 61 * 2**30 and "this host" in host["device_memory_source"]
    assert host["kv_available_bytes"] - table["kv_available_bytes"] == pytest.approx(
        0.9 * (61 * 2**30 - 65452113920), abs=2
    )
    given = json.loads(cli("fit", str(model), "--json", "--hbm-gib", "32", "--workdir", str(tmp_path / "wd")).stdout)
    assert given["device_memory_bytes"] == 32 * 2**30  # --hbm-gib is what the user says: it wins


@pytest.mark.parametrize("gbps", ["-5", "NaN", "0", "\"fast\""])
def test_a_probe_result_that_is_not_a_bandwidth_is_refused(cli, tmp_path: Path, gbps: str) -> None:
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / "probe.json").write_text('{"device": "npu:0", "gbps": %s}' % gbps)
    line = assert_one_line_error(cli("fit", str(_model(tmp_path / "m", DENSE)), "--workdir", str(tmp_path / "wd")))
    # NaN is refused by the JSON reader itself (no file of ours holds one); the rest by the bandwidth check
    assert ("which is not a number JSON allows" if gbps == "NaN" else "is not a bandwidth") in line


HUNYUAN_A13B = {  # Tencent-Hunyuan/Hunyuan-A13B models/config.json: per-layer MoE lists, attention_head_dim
    "model_type": "hunyuan",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "attention_head_dim": 128,
    "intermediate_size": 3072,
    "num_experts": 64,
    "moe_intermediate_size": [3072] * 32,
    "moe_topk": [8] * 32,
    "num_shared_expert": [1] * 32,
    "use_mixed_mlp_moe": True,
    "vocab_size": 128167,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
OMNI_7B = {  # Qwen2.5-Omni-7B: vLLM serves the thinker, whose language model is thinker_config.text_config
    "model_type": "qwen2_5_omni",
    "architectures": ["Qwen2_5OmniModel"],
    "thinker_config": {
        "model_type": "qwen2_5_omni_thinker",
        "text_config": {
            "vocab_size": 152064,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "max_position_embeddings": 32768,
        },
    },
}


def test_per_layer_moe_lists_are_read_layer_by_layer() -> None:
    fit = _fit(HUNYUAN_A13B, context=8192)
    h, layers = 4096, 32
    attention = h * 32 * 128 * 2 + h * 8 * 128 * 2
    expert = 3 * h * 3072
    body = layers * (attention + 64 * expert + expert)  # 64 routed experts and one shared MLP a layer
    assert fit.weights_bytes == (body + 128167 * h) * 2  # tied: one embedding matrix
    assert fit.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    halved = _fit({**HUNYUAN_A13B, "moe_intermediate_size": [3072] * 16 + [1536] * 16}, context=8192)
    assert fit.weights_bytes - halved.weights_bytes == 16 * 64 * 3 * h * 1536 * 2


def test_an_omni_models_thinker_is_estimated() -> None:
    fit = _fit(OMNI_7B, context=32768)
    assert fit.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 and fit.kv_tokens > 0 and fit.fits


def test_eager_mode_has_its_own_figure_and_flag(cli, tmp_path: Path) -> None:
    """The field report: 10.3 tok/s eager against 58.9 in graph mode; --enforce-eager makes it the headline."""
    model = _model(tmp_path / "m", DENSE)
    graph = json.loads(cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd")).stdout)
    eager = json.loads(cli("fit", str(model), "--json", "--enforce-eager", "--workdir", str(tmp_path / "wd")).stdout)
    assert graph["decode_tok_s_eager"] == eager["decode_tok_s"] < graph["decode_tok_s"] / 4
    assert "eager: one measurement" in eager["speed_source"] and "fitted on" in graph["speed_source"]
    assert next(t for t in eager["memory_terms"] if t["name"] == "graph pool")["source"].startswith("none")
    more = json.loads(
        cli("fit", str(model), "--json", "--max-num-batched-tokens", "65536", "--workdir", str(tmp_path / "wd")).stdout
    )
    peak = {t["name"]: t["bytes"] for t in more["memory_terms"]}["profiling peak"]
    assert peak > {t["name"]: t["bytes"] for t in graph["memory_terms"]}["profiling peak"]
    assert more["kv_available_bytes"] == graph["kv_available_bytes"] - (
        peak - {t["name"]: t["bytes"] for t in graph["memory_terms"]}["profiling peak"]
    )


#: A Qwen3.5-27B layer of each kind as its checkpoint names and shapes them (vLLM's qwen3_5.py / qwen3_next.py).
QWEN35_TENSORS = {
    "model.language_model.embed_tokens.weight": ("BF16", [248320, 5120]),
    "model.language_model.layers.0.linear_attn.A_log": ("F32", [48]),
    "model.language_model.layers.0.linear_attn.conv1d.weight": ("BF16", [10240, 1, 4]),
    "model.language_model.layers.0.linear_attn.out_proj.weight": ("BF16", [5120, 6144]),
    "model.language_model.layers.0.mlp.down_proj.weight": ("BF16", [5120, 17408]),
    "model.language_model.layers.3.self_attn.q_norm.weight": ("BF16", [256]),
    "model.language_model.layers.3.self_attn.k_proj.weight": ("BF16", [1024, 5120]),
    "model.language_model.layers.3.self_attn.o_proj.weight": ("BF16", [5120, 6144]),
    "model.visual.blocks.0.attn.proj.weight": ("BF16", [1152, 1152]),
    "mtp.layers.0.self_attn.o_proj.weight": ("BF16", [5120, 2048]),
}
_BYTES = {"BF16": 2, "F32": 4}


def _shaped_shard(path: Path, tensors: dict) -> None:
    """A shard whose header holds these tensors' real shapes; the data is a hole (a sparse file)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = _BYTES[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(blob)) + blob)
        handle.truncate(8 + len(blob) + offset)


def test_a_partial_config_is_completed_from_its_tensor_shapes(tmp_path: Path) -> None:
    """The referee's partial Qwen3.8-27B (layer pattern, KV heads, head_dim only) beside real-shaped tensors: the
    headers give hidden_size, the heads and the Gated DeltaNet dims, and fit's figures are those of the full
    config; with a header that shows no such tensor, the one line says the headers do not show them either."""
    partial = {"text_config": {"num_hidden_layers": 64, "full_attention_interval": 4, "num_key_value_heads": 4}}
    partial["text_config"]["head_dim"] = 256
    full = {
        "text_config": {
            **partial["text_config"],
            "hidden_size": 5120,
            "num_attention_heads": 24,
            "intermediate_size": 17408,
            "vocab_size": 248320,
            "linear_num_value_heads": 48,
            "linear_num_key_heads": 16,
            "linear_value_head_dim": 128,
            "linear_key_head_dim": 128,
            "linear_conv_kernel_dim": 4,
        }
    }
    figures = {}
    for name, config in (("partial", partial), ("full", full)):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        _shaped_shard(d / "model.safetensors", QWEN35_TENSORS)
        files = local_files(d)
        fit = estimate(files, CARD, ROW, context=32768, utilisation=0.9, kv_dtype="bf16")
        figures[name] = (fit.kv_tokens, fit.concurrency, files.origin)
    assert figures["partial"][:2] == figures["full"][:2]
    assert "hidden_size" in figures["partial"][2] and "linear_num_key_heads" in figures["partial"][2]
    assert "from the headers" not in figures["full"][2]
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps(partial))
    _shaped_shard(bare / "model.safetensors", {"model.weights": ("BF16", [1024])})
    with pytest.raises(BadInput, match=r"lacks hidden_size, num_attention_heads, .*headers do not show them"):
        local_files(bare)
