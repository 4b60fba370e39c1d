"""bench --plot: the file types it draws, the message when matplotlib is missing, and a PNG with the curve."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ascend_setup.bench import plot
from ascend_setup.errors import BadInput

LEVELS = [
    {"concurrency": 1, "tpot_ms": 16.5, "output_tok_s": 55.0},
    {"concurrency": 4, "tpot_ms": 19.0, "output_tok_s": 190.0},
    {"concurrency": 16, "tpot_ms": 28.0, "output_tok_s": 480.0},
]


def test_other_file_types_and_missing_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"\.png or a \.svg"):
        plot.check(tmp_path / "curve.jpg")
    with pytest.raises(BadInput, match="no folder"):
        plot.check(tmp_path / "nowhere" / "curve.png")


def test_without_matplotlib_the_message_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(BadInput, match="matplotlib") as caught:
        plot.check(tmp_path / "curve.png")
    assert "ascend-setup[plot]" in (caught.value.hint or "")


@pytest.mark.parametrize("name", ["curve.png", "curve.svg"])
def test_draw_writes_the_picture(tmp_path: Path, name: str) -> None:
    pytest.importorskip("matplotlib")
    plot.check(tmp_path / name)
    plot.draw(tmp_path / name, LEVELS, "bench m")
    data = (tmp_path / name).read_bytes()
    assert data.startswith(b"\x89PNG") if name.endswith(".png") else b"<svg" in data[:2000]
    if name.endswith(".svg"):
        assert b"c=16" in data  # each point is labelled (matplotlib keeps the text in a comment)


def test_fit_and_published_points_are_read_from_the_verdicts() -> None:
    verdicts = [
        {
            "references": [
                {"reference": "fit", "tpot_ms": 20.0, "output_tok_s": 45.0},
                {"reference": "published", "tpot_ms": 25.0, "output_tok_s": 700.0},
                {"reference": "calibration", "tpot_ms": 21.0, "output_tok_s": None},
            ]
        },
        {"references": [{"reference": "fit", "tpot_ms": None, "output_tok_s": None}]},
    ]
    assert plot.references(verdicts) == {"fit": [(50.0, 45.0)], "published": [(40.0, 700.0)]}
    assert plot.references([]) == {}


def test_the_picture_shows_fits_curve_and_the_published_points(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    verdicts = [
        {
            "references": [
                {"reference": "fit", "tpot_ms": lv["tpot_ms"], "output_tok_s": lv["output_tok_s"]},
                {"reference": "published", "tpot_ms": 25.0, "output_tok_s": 700.0},
            ]
        }
        for lv in LEVELS
    ]
    plot.draw(tmp_path / "c.svg", LEVELS, "bench m", verdicts)
    data = (tmp_path / "c.svg").read_bytes()
    assert b"fit's prediction" in data and b"published" in data and b"measured" in data
