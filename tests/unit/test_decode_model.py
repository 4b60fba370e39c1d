"""The decode model's terms: fitted on the field report's measurements with the bytes fit counts today (recounted
here, so a change in counting that is not refitted fails), the report's table held, bytes per token by part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.models import CARD, DENSE, HYBRID_27B, QWEN3_VL_8B, ROW
from helpers.models import make_model as _model

from ascend_setup.fit.cards import load_table
from ascend_setup.fit.decode import bytes_per_token, predict, solve
from ascend_setup.fit.estimate import estimate
from ascend_setup.fit.model_files import ModelFiles, kv_layout, local_files, weights

A2 = load_table().decode_models["a2-graph"]


def _report_models(tmp_path: Path) -> dict:
    """The report's two models as tests/helpers/models.py builds them: Qwen3-VL-8B's config, Qwen3.8-27B's
    headers."""
    return {
        "Qwen3-VL-8B": local_files(_model(tmp_path / "vl8b", QWEN3_VL_8B)),
        "Qwen3.8-27B": local_files(
            _model(
                tmp_path / "27b",
                HYBRID_27B,
                {"model.safetensors": {"model.weight": ("BF16", 54_000_000_000)}},
                data=False,
            )
        ),
    }


def test_the_card_terms_are_the_least_squares_fit_of_their_measurements_and_bytes(tmp_path: Path) -> None:
    models = _report_models(tmp_path)
    for m in A2.measurements:  # the provenance's bytes are what fit counts now
        assert bytes_per_token(models[m.model], context=A2.context) == pytest.approx(m.bytes_per_token, rel=1e-9)
    refit = solve([(m.bytes_per_token, m.tok_s) for m in A2.measurements], A2.measurements[0].bandwidth_gbps)
    assert refit.eta == pytest.approx(A2.eta, abs=5e-4) and refit.t_fixed_s * 1000 == pytest.approx(
        A2.t_fixed_ms, abs=5e-3
    )
    assert CARD.decode == A2  # the 910B3 decodes with it


@pytest.mark.parametrize("name, measured", [("Qwen3-VL-8B", 58.9), ("Qwen3.8-27B", 19.3)])
def test_the_reports_table_at_1490_gbps_within_7_percent(tmp_path: Path, name: str, measured: float) -> None:
    fit = estimate(
        _report_models(tmp_path)[name], CARD, ROW, context=32768, utilisation=0.9, kv_dtype="bf16", bandwidth=1490
    )
    assert fit.decode_tok_s == pytest.approx(measured, rel=0.07)
    assert fit.decode["bound"] == "bandwidth" and fit.decode["method"] == "card"
    seconds = fit.decode["t_fixed_ms"] / 1000 + fit.decode["bytes_per_token"] / (fit.decode["eta"] * 1490e9)
    assert fit.decode_tok_s == pytest.approx(1 / seconds, abs=0.05)  # the printed terms give the printed speed


def test_kv_at_the_context_and_the_recurrent_state_are_read_every_token(tmp_path: Path) -> None:
    files = _report_models(tmp_path)["Qwen3.8-27B"]
    kv = kv_layout(HYBRID_27B, 4096, 2)
    assert bytes_per_token(files, context=4096) - bytes_per_token(files, context=1024) == 3072 * kv.per_token_bytes
    assert bytes_per_token(files, context=1) == 54e9 + kv.per_token_bytes + kv.state_bytes_per_sequence
    half = bytes_per_token(files, context=1024, tp=2)  # 4 KV heads over 2 cards; weights and state halved
    assert half == pytest.approx(bytes_per_token(files, context=1024) / 2)


def _quantised(tmp_path: Path, name: str, quant_type: str) -> ModelFiles:
    model = _model(tmp_path / name, DENSE)
    (model / "quant_model_description.json").write_text(json.dumps({"model_quant_type": quant_type}))
    return local_files(model)


def test_quantised_weights_at_their_width_with_scales(tmp_path: Path) -> None:
    bf16 = weights(local_files(_model(tmp_path / "bf16", DENSE)))
    h, vocab = DENSE["hidden_size"], DENSE["vocab_size"]
    embeddings = (vocab * h + h) * 2  # the LM head whole and one embedding row stay bf16
    linear = (bf16.per_token_bytes - embeddings) // 2  # attention and MLP parameters
    w8 = weights(_quantised(tmp_path, "w8a8", "W8A8"))
    assert w8.per_token_bytes == linear + linear // h * 16 + embeddings  # 1 byte each, fp32 scales per row
    w4 = weights(_quantised(tmp_path, "w4a8", "W4A8_DYNAMIC"))
    assert w4.per_token_bytes == linear // 2 + linear // h * 16 + linear // 128 * 2 + embeddings  # + group scales
    assert "W4A8_DYNAMIC" in w4.note and w4.dtype == "W4A8_DYNAMIC"
    gptq = weights(
        local_files(
            _model(
                tmp_path / "gptq",
                {**DENSE, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 64}},
            )
        )
    )
    assert gptq.per_token_bytes == linear // 2 + linear // h * 16 + linear // 64 * 2 + embeddings


def test_tp_on_a_small_model_is_launch_bound(tmp_path: Path) -> None:
    files = local_files(_model(tmp_path / "dense", DENSE))
    one = estimate(files, CARD, ROW, context=8192, utilisation=0.9, kv_dtype="bf16")
    four = estimate(files, CARD, ROW, context=8192, utilisation=0.9, kv_dtype="bf16", tp=4)
    assert one.decode["bound"] == "bandwidth" and four.decode["bound"] == "launch"
    assert four.decode["fixed_ms"] == A2.t_fixed_ms_multi_card > four.decode["bandwidth_ms"]
    assert any(n.startswith("launch-bound, not bandwidth-bound") and "TP 4" in n for n in four.notes)
    assert predict(A2.terms(4), four.decode["bytes_per_token"], CARD.peak_gbps).tok_s == pytest.approx(
        four.decode_tok_s, abs=0.05
    )


def test_the_eager_fixed_cost_reproduces_the_reports_eager_speed(tmp_path: Path) -> None:
    """10.3 tok/s with --enforce-eager (the field report, Qwen3-VL-8B): one measurement, eta kept."""
    (vl8b,) = [m for m in A2.measurements if m.model == "Qwen3-VL-8B"]
    eager = predict(A2.eager_terms(), vl8b.bytes_per_token, vl8b.bandwidth_gbps)
    assert eager.tok_s == pytest.approx(10.3, abs=0.05) and "10.3 tok/s" in A2.eager_source
    fit = estimate(
        _report_models(tmp_path)["Qwen3-VL-8B"],
        CARD,
        ROW,
        context=32768,
        utilisation=0.9,
        kv_dtype="bf16",
        bandwidth=1490,
    )
    assert fit.decode_tok_s_eager == pytest.approx(10.3, abs=0.05)
