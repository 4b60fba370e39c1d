"""`bench --url` takes what runs there (--model-dir, --card, --tp) as parse-time types: a bad value is one line and
exit 2 before any request; with a NAME they are refused (serve's record says them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_setup.simulate.model_dirs import build_model

URL = "http://127.0.0.1:9"  # never reached: each case fails before the sweep


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--model-dir", "/nowhere"], "/nowhere holds no config.json"),
        (["--card", "H100"], "'H100' is not a card of fit's table"),
        (["--tp", "0"], "0 is not a number of cards"),
        (["--tp", "two"], "'two' is not a number"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(cli, extra: list, said: str) -> None:
    proc = cli("bench", "--url", URL, *extra)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_they_are_for_url_only(cli, tmp_path: Path) -> None:
    proc = cli("bench", "dense", "--card", "910B3", "--tp", "2", "--workdir", str(tmp_path))
    assert proc.returncode == 2 and "--card, --tp: for --url only" in proc.stderr, proc.stderr


def test_a_tp_the_heads_do_not_divide_is_bad_input(cli, tmp_path: Path) -> None:
    from ascend_setup.bench import verdict
    from ascend_setup.errors import BadInput

    model = build_model(tmp_path / "m")
    with pytest.raises(BadInput, match="does not divide"):
        verdict.url_context("m", URL, model, "910B3", 3)
    ctx = verdict.url_context("m", URL, model, "910B3", 2)
    assert ctx.model_dir == model and ctx.tp == 2 and ctx.tp_from == "--tp" and ctx.url == URL
    no_card = verdict.url_context("m", URL, model, None, None)
    assert no_card.model_dir is None and "--card" in verdict.fit_reference(no_card, 1, 8, 8, 0.1).what
