"""`fit` on a host with speed measurements, as a user runs it: calibrated by default, --no-calibration,
--calibration to list them, --forget, and a corrupt points file refused (exit 2) and left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.models import CARD, HYBRID_27B, QWEN3_VL_8B
from helpers.models import make_model as _model

from ascend_setup.fit.calibration import SpeedPoint, now_utc, points_path, record_point
from ascend_setup.fit.decode import Terms, bytes_per_token, predict
from ascend_setup.fit.model_files import local_files

HOST = Terms(eta=0.6, t_fixed_s=0.006)


def _record(cache: Path, name: str, nbytes: float, tok_s: float = 0, graph_mode: bool = True) -> None:
    record_point(
        SpeedPoint(
            card="910B3",
            cann="9.1.0",
            tp=1,
            graph_mode=graph_mode,
            model=name,
            bytes_per_token=nbytes,
            tok_s=tok_s or predict(HOST, nbytes, CARD.peak_gbps).tok_s,
            measured_at=now_utc(),
        ),
        cache / "ascend-setup",
    )


@pytest.fixture
def host(tmp_path: Path):
    """A fake host's cache with two graph-mode points of two sizes and one eager point; the model to fit."""
    cache = tmp_path / "cache"
    vl8b = _model(tmp_path / "vl8b", QWEN3_VL_8B)
    big = _model(tmp_path / "27b", HYBRID_27B, {"model.safetensors": {"w": ("BF16", 54_000_000_000)}}, data=False)
    for name, model in (("Qwen3-VL-8B", vl8b), ("Qwen3.8-27B", big)):
        _record(cache, name, bytes_per_token(local_files(model), context=1024))
    _record(cache, "Qwen3-VL-8B eager", bytes_per_token(local_files(vl8b), context=1024), 10.3, graph_mode=False)
    return cache, vl8b


def test_fit_uses_lists_ignores_and_forgets_the_hosts_points(cli, host, tmp_path: Path) -> None:
    cache, model = host
    env = {"XDG_CACHE_HOME": str(cache)}
    base = ("--cann", "9.1.0", "--workdir", str(tmp_path / "wd"))
    fit = json.loads(cli("fit", str(model), "--json", *base, env=env).stdout)
    assert fit["speed_source"].startswith("calibrated on this host from 2 measurements")
    assert fit["decode"]["method"] == "both" and fit["decode"]["eta"] == pytest.approx(HOST.eta, abs=1e-3)
    assert fit["decode_tok_s"] == pytest.approx(predict(HOST, fit["decode"]["bytes_per_token"], 1490).tok_s, abs=0.1)
    human = cli("fit", str(model), *base, env=env).stdout
    assert "speed: calibrated on this host from 2 measurements" in human and "t_fixed 6.00 ms" in human
    assert "host measurement not used: Qwen3-VL-8B eager at 10.3 tok/s" in human and "--enforce-eager" in human

    card = json.loads(cli("fit", str(model), "--json", "--no-calibration", *base, env=env).stdout)
    assert card["decode"]["method"] == "card" and "--no-calibration" in card["speed_source"]
    assert card["decode_tok_s"] > fit["decode_tok_s"] and card["calibration"] == []

    listed = json.loads(cli("fit", "--calibration", "--json", *base, env=env).stdout)
    assert [p["used"] for p in listed["points"]] == [True, True, False] and listed["method"] == "both"
    assert listed["points"][2]["bound"] == "launch"
    text = cli("fit", "--calibration", *base, env=env).stdout
    assert "eager mode" in text and "not used (measured with --enforce-eager" in text

    forgot = cli("fit", "--calibration", "--forget", *base, env=env)
    assert forgot.returncode == 0 and "forgot 3 measurements on 910B3" in forgot.stdout
    assert json.loads(cli("fit", "--calibration", "--json", *base, env=env).stdout)["points"] == []
    assert json.loads(cli("fit", str(model), "--json", *base, env=env).stdout)["decode_tok_s"] == card["decode_tok_s"]

    assert_one_line_error(cli("fit", *base, env=env))  # no MODEL
    assert_one_line_error(cli("fit", str(model), "--forget", *base, env=env))  # --forget without --calibration
    assert_one_line_error(cli("fit", str(model), "--calibration", "--no-calibration", *base, env=env))


def test_a_corrupt_points_file_is_exit_2_and_left_untouched(cli, host, tmp_path: Path) -> None:
    cache, model = host
    path = points_path(cache / "ascend-setup")
    path.write_text('{"version": 1, "points": [{"card": "910B3"')
    before = path.read_bytes()
    env = {"XDG_CACHE_HOME": str(cache)}
    for args in ((str(model),), ("--calibration",), ("--calibration", "--forget")):
        line = assert_one_line_error(cli("fit", *args, "--workdir", str(tmp_path / "wd"), env=env))
        assert "speed measurements file" in line and "corrupt" in line and "never overwrites" in line
    out = cli("fit", str(model), "--json", "--workdir", str(tmp_path / "wd"), env=env)
    assert out.returncode == 2 and "corrupt" in json.loads(out.stdout)["error"]
    assert path.read_bytes() == before
    assert cli("fit", str(model), "--no-calibration", "--workdir", str(tmp_path / "wd"), env=env).returncode == 0
