"""A host learns its own decode speed: points recorded on a fake host (a temp cache), the terms refitted from
them, the prediction for another model moving as those terms say; outliers kept and shown, not used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from helpers.models import CARD, DEEPSEEK_V2_LITE, HYBRID_27B, QWEN3_VL_8B, ROW
from helpers.models import make_model as _model
from pydantic import ValidationError

from ascend_setup.errors import BadInput
from ascend_setup.fit.calibration import (
    SpeedPoint,
    calibrate,
    forget_points,
    load_points,
    now_utc,
    points_path,
    record_point,
)
from ascend_setup.fit.decode import Terms, bytes_per_token, predict
from ascend_setup.fit.estimate import estimate
from ascend_setup.fit.model_files import local_files

#: The fake host: slower than the card's model says (a longer fixed cost, a lower eta).
HOST = Terms(eta=0.6, t_fixed_s=0.006)
BW = CARD.peak_gbps


def _bytes(tmp_path: Path, name: str, config: dict, shards: Optional[dict] = None) -> float:
    return bytes_per_token(local_files(_model(tmp_path / name, config, shards, data=False)), context=1024)


def _point(name: str, nbytes: float, tok_s: Optional[float] = None, **kw) -> SpeedPoint:
    return SpeedPoint(
        **{
            "card": "910B3",
            "cann": "9.1.0",
            "tp": 1,
            "graph_mode": True,
            "model": name,
            "bytes_per_token": nbytes,
            "tok_s": tok_s or predict(HOST, nbytes, BW).tok_s,
            "measured_at": now_utc(),
            **kw,
        }
    )


def _fit(files, calibration=None):
    return estimate(files, CARD, ROW, context=1024, utilisation=0.9, kv_dtype="bf16", calibration=calibration)


def test_two_points_refit_both_terms_and_move_a_third_models_prediction(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    small = _bytes(tmp_path, "vl8b", QWEN3_VL_8B)
    big = _bytes(tmp_path, "27b", HYBRID_27B, {"model.safetensors": {"w": ("BF16", 54_000_000_000)}})
    path = record_point(_point("Qwen3-VL-8B", small), cache)
    assert record_point(_point("Qwen3.8-27B", big), cache) == path == points_path(cache)
    points = load_points("Ascend910B3", cache)  # any spelling of the card
    calibration = calibrate(points, CARD.decode, BW, tp=1, cann="9.1.0")
    assert calibration.method == "both" and all(j.used for j in calibration.points)
    assert calibration.source.startswith("calibrated on this host from 2 measurements")
    assert calibration.terms.eta == pytest.approx(HOST.eta) and calibration.terms.t_fixed_s == pytest.approx(
        HOST.t_fixed_s
    )
    third = local_files(_model(tmp_path / "moe", DEEPSEEK_V2_LITE))  # a MoE: 2.4B active of 15.7B
    card_fit, host_fit = _fit(third), _fit(third, calibration)
    expected = predict(HOST, bytes_per_token(third, context=1024), BW).tok_s
    assert host_fit.decode_tok_s == pytest.approx(expected, abs=0.05) and host_fit.decode_tok_s < card_fit.decode_tok_s
    assert host_fit.speed_source == calibration.source and host_fit.decode["method"] == "both"


def test_one_point_adjusts_eta_only(tmp_path: Path) -> None:
    nbytes = _bytes(tmp_path, "vl8b", QWEN3_VL_8B)
    host = Terms(eta=0.6, t_fixed_s=CARD.decode.t_fixed_ms / 1000)
    point = _point("Qwen3-VL-8B", nbytes, predict(host, nbytes, BW).tok_s)
    calibration = calibrate([point], CARD.decode, BW, tp=1, cann="9.1.0")
    assert calibration.method == "eta" and "from 1 measurement (eta adjusted" in calibration.source
    assert calibration.terms == Terms(pytest.approx(0.6), host.t_fixed_s)


def test_far_points_and_eager_points_are_kept_shown_and_not_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    nbytes = _bytes(tmp_path, "vl8b", QWEN3_VL_8B)
    card_says = predict(CARD.decode.terms(), nbytes, BW).tok_s
    record_point(_point("Qwen3-VL-8B", nbytes, card_says * 0.95), cache)
    record_point(_point("slow", nbytes, card_says / 3), cache)  # graph mode, 3x below
    record_point(_point("eager", nbytes, 10.3, graph_mode=False), cache)  # the report's eager run
    record_point(_point("tp2", nbytes / 2, 30, tp=2), cache)
    record_point(_point("other row", nbytes, card_says, cann="9.0.1"), cache)
    calibration = calibrate(load_points("910B3", cache), CARD.decode, BW, tp=1, cann="9.1.0")
    judged = {j.point.model: j for j in calibration.points}
    assert len(judged) == 5 and [m for m, j in judged.items() if j.used] == ["Qwen3-VL-8B"]
    assert "3.0x below the model's" in judged["slow"].why and judged["slow"].bound == "bandwidth"
    assert "--enforce-eager" in judged["eager"].why and "launch-bound" in judged["eager"].why
    assert judged["eager"].bound == "launch"
    assert "TP 2" in judged["tp2"].why and "9.0.1 row" in judged["other row"].why
    assert calibration.method == "eta" and "4 host measurements kept but not used" in calibration.source
    fit = _fit(local_files(_model(tmp_path / "vl8b", QWEN3_VL_8B)), calibration)
    assert sum("host measurement not used" in n for n in fit.notes) == 4
    assert [p["used"] for p in fit.calibration].count(False) == 4


def test_a_corrupt_points_file_is_bad_input_and_never_overwritten(tmp_path: Path) -> None:
    path = points_path(tmp_path)
    path.parent.mkdir(parents=True)
    for text in ("{not json", json.dumps({"version": 1, "points": [{"card": "910B3", "tok_s": -1}]})):
        path.write_text(text)
        for call in (
            lambda: record_point(_point("m", 1e9, 50), tmp_path),
            lambda: load_points("910B3", tmp_path),
            lambda: forget_points("910B3", tmp_path),
        ):
            with pytest.raises(BadInput, match=r"speed measurements file .* corrupt") as exc:
                call()
            assert exc.value.exit_code == 2 and "never overwrites" in exc.value.hint
        assert path.read_text() == text


def test_points_are_bounded_and_forgetting_keeps_other_cards(tmp_path: Path) -> None:
    for bad in (
        {"tok_s": -5},
        {"tok_s": float("nan")},
        {"bytes_per_token": float("inf")},
        {"tp": 0},
        {"measured_at": "2026-12-01T10:00:00+08:00"},
        {"measured_at": "yesterday"},
    ):
        with pytest.raises(ValidationError):
            SpeedPoint.model_validate({**_point("m", 1e9, 50).model_dump(), **bad})
    record_point(_point("a", 1e9, 50), tmp_path)
    record_point(_point("b", 1e9, 50, card="910B4"), tmp_path)
    assert forget_points("910b3", tmp_path) == 1 and forget_points("910B3", tmp_path) == 0
    assert [p.model for p in load_points("910B4", tmp_path)] == ["b"]
    assert not list(points_path(tmp_path).parent.glob("*.tmp"))  # atomic writes leave no temp file
