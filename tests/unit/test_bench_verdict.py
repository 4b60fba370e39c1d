"""bench's verdict rules: each reference fires on its evidence and stays quiet without it; a level within the
tolerance is 'as predicted', outside it slower (with the reasons found) or faster; the published figures ship as
data, each a row of ../shared/fit-referee with the same figure."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Dict, List

import pytest

from ascend_setup.bench import verdict
from ascend_setup.bench.reasons import Reason
from ascend_setup.bench.verdict import Context, Figure, Run, RunLevel
from ascend_setup.errors import BadInput

REFEREE = Path(__file__).resolve().parents[3] / "shared" / "fit-referee"
EAGER = Reason("eager-mode", "the server was started with --enforce-eager", "start it without --enforce-eager")


def level(c: int, tpot: float) -> Dict[str, Any]:
    return {"concurrency": c, "tpot_ms": tpot, "ttft_s": 0.1, "output_tok_s": c * 1000 / tpot}


def figure(**given: Any) -> Figure:
    row = {
        "id": "x",
        "source": "s",
        "model": "Org/Qwen2.5-Omni-7B",
        "card": "910B3",
        "tp": 1,
        "concurrency": 20,
        "input_len": 3500,
        "output_len": 1500,
        "tpot_ms": 25.0,
    }
    return Figure(**{**row, **given})


def test_the_words_and_the_tolerance() -> None:
    assert verdict.word(1.0) == verdict.word(0.86) == verdict.word(1.14) == "as predicted"
    assert verdict.word(0.84) == "slower than predicted" and verdict.word(1.16) == "faster than predicted"


def test_fit_is_quiet_for_a_bare_url_and_says_why() -> None:
    ref = verdict.fit_reference(Context("m", ""), 4, 128, 128, 0.1)
    assert ref.tpot_ms is None and "bare URL" in ref.what


def test_a_published_figure_matches_on_model_card_tp_concurrency_and_lengths_within_2x() -> None:
    ctx = Context("qwen2.5-omni-7b", "", card="910b3", tp=1)
    assert len(verdict.published_references(ctx, 20, 2000, 1000, [figure()])) == 1
    quiet = [
        figure(card="910B4"),
        figure(tp=2),
        figure(concurrency=16),
        figure(input_len=128),
        figure(output_len=5000),
        figure(model="Qwen3-8B"),
    ]
    for row in quiet:
        assert verdict.published_references(ctx, 20, 2000, 1000, [row]) == [], row
    assert len(verdict.published_references(ctx, 20, 9, 9, [figure(input_len=None, output_len=None)])) == 1
    assert verdict.published_references(Context("qwen2.5-omni-7b", ""), 20, 2000, 1000, [figure()]) == []  # no card


def test_calibration_is_the_median_of_the_same_server_model_and_lengths() -> None:
    ctx = Context("m", "vllm serve /m")

    def run(tpot: float, **given: Any) -> Run:
        base = {
            "model": "m",
            "command": "vllm serve /m",
            "input_len": 128,
            "output_len": 24,
            "measured_at": 1.0,
            "levels": [RunLevel(concurrency=4, tpot_ms=tpot)],
        }
        return Run(**{**base, **given})

    runs = [
        run(10),
        run(12),
        run(30),
        run(99, command="vllm serve /m --enforce-eager"),
        run(99, input_len=64),
        run(99, model="other"),
    ]
    ref = verdict.calibration_reference(runs, ctx, 4, 128, 24)
    assert ref.tpot_ms == 12 and "median of 3" in ref.what
    assert verdict.calibration_reference(runs, ctx, 16, 128, 24).tpot_ms is None  # no run at 16: quiet


def test_a_url_sweeps_calibration_is_keyed_by_its_url_and_model(tmp_path: Path) -> None:
    here = verdict.url_context("m", "http://a:8000", None, None, None)
    verdict.save_run(tmp_path, here, 128, 24, [level(4, 16.0)])
    verdict.save_run(tmp_path, verdict.url_context("m", "http://b:8000", None, None, None), 128, 24, [level(4, 99.0)])
    verdict.save_run(tmp_path, verdict.url_context("n", "http://a:8000", None, None, None), 128, 24, [level(4, 99.0)])
    runs = verdict.earlier_runs(tmp_path)
    assert {r.url for r in runs} == {"http://a:8000", "http://b:8000"}
    ref = verdict.calibration_reference(runs, here, 4, 128, 24)
    assert ref.tpot_ms == 16.0 and "median of 1" in ref.what
    named = Context("m", "vllm serve /m")  # a NAME's runs stay keyed by its command
    verdict.save_run(tmp_path, named, 128, 24, [level(4, 20.0)])
    assert verdict.calibration_reference(verdict.earlier_runs(tmp_path), named, 4, 128, 24).tpot_ms == 20.0


def test_a_slow_level_carries_the_reasons_and_a_level_as_predicted_none(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = Context("qwen2.5-omni-7b", "", card="910B3")
    monkeypatch.setattr(
        verdict, "published", lambda: verdict.Published(figures=[figure(concurrency=1), figure(concurrency=4)])
    )
    found = verdict.verdicts(ctx, [level(1, 26.0), level(4, 40.0)], 3500, 1500, [], [EAGER])
    assert [(v.verdict, v.against) for v in found] == [
        ("as predicted", "published"),
        ("slower than predicted", "published"),
    ]
    assert found[0].reasons == [] and found[1].reasons == [f"eager-mode: {EAGER.evidence}"]
    faster = verdict.verdicts(ctx, [level(1, 20.0)], 3500, 1500, [], [EAGER])[0]
    assert faster.verdict == "faster than predicted" and faster.reasons == []
    unexplained = verdict.verdicts(ctx, [level(4, 40.0)], 3500, 1500, [], [])[0]
    assert unexplained.reasons == ["no reason found in the server's command line, log or /metrics"]
    none = verdict.verdicts(Context("m", ""), [level(2, 10.0)], 128, 24, [], [EAGER])[0]
    assert none.verdict == "no reference" and none.against is None and none.reasons == []
    text = verdict.lines(found)
    assert text[0].startswith("concurrency 1: as predicted against published (TPOT against published 25 ms")
    assert any(line.startswith("reference published: x: s") for line in text)


def test_runs_are_saved_and_read_back(tmp_path: Path) -> None:
    ctx = Context("m", "vllm serve /m")
    verdict.save_run(tmp_path, ctx, 128, 24, [level(1, 16.5), level(4, 16.6)])
    (run,) = verdict.earlier_runs(tmp_path)
    assert run.model == "m" and [lv.concurrency for lv in run.levels] == [1, 4]
    assert verdict.calibration_reference([run], ctx, 4, 128, 24).tpot_ms == 16.6
    (tmp_path / "bench" / "99999999.json").write_text('{"model": 5}')
    with pytest.raises(BadInput):
        verdict.earlier_runs(tmp_path)


def test_the_shipped_figures_load_and_a_damaged_file_is_bad_input(tmp_path: Path) -> None:
    rows = verdict.load_published().figures
    assert len(rows) >= 8 and len({r.id for r in rows}) == len(rows)
    bad = tmp_path / "p.yaml"
    bad.write_text("figures:\n  - id: x\n    tpot_ms: -1\n")
    with pytest.raises(BadInput):
        verdict.load_published(bad)


@pytest.mark.skipif(not (REFEREE / "MEASUREMENTS.tsv").is_file(), reason="the referee is not beside this checkout")
def test_each_shipped_figure_is_a_referee_row_with_the_same_figure() -> None:
    with (REFEREE / "MEASUREMENTS.tsv").open(newline="") as handle:
        tsv = {r["id"]: r for r in csv.DictReader(handle, delimiter="\t")}
    for row in verdict.load_published().figures:
        ref = tsv[row.id]
        assert ref["model"].rsplit("/", 1)[-1] == row.model and int(ref["tp"]) == row.tp, row.id
        value = float(ref["value"])
        shipped: List[float] = [row.output_tok_s or 0, row.tpot_ms, round(1000 / row.tpot_ms, 1)]
        assert any(abs(value - s) < 0.01 for s in shipped), (row.id, value, shipped)
        assert (REFEREE / "excerpts" / f"{row.id}.txt").is_file()


def test_a_level_gets_only_the_reasons_that_explain_its_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = Context("qwen2.5-omni-7b", "", card="910B3")
    monkeypatch.setattr(
        verdict, "published", lambda: verdict.Published(figures=[figure(concurrency=1), figure(concurrency=4)])
    )
    cap = Reason("max-num-seqs", "the server's --max-num-seqs 2 is below concurrency 4", "f", levels=[4])
    cache = Reason("prefix-cache", "bench ran with --prefix-cache", "f", effect="faster")
    spec = Reason("speculative-decoding", "--speculative-config", "f", effect="either")
    slow1, slow4 = verdict.verdicts(ctx, [level(1, 40.0), level(4, 40.0)], 3500, 1500, [], [cap, cache, spec])
    assert slow1.reasons == ["speculative-decoding: --speculative-config"]  # the cap is concurrency 4's
    assert slow4.reasons == [f"max-num-seqs: {cap.evidence}", "speculative-decoding: --speculative-config"]
    fast = verdict.verdicts(ctx, [level(1, 20.0)], 3500, 1500, [], [cap, cache, spec])[0]
    assert fast.verdict == "faster than predicted"
    assert fast.reasons == [f"prefix-cache: {cache.evidence}", "speculative-decoding: --speculative-config"]


def test_fits_reference_carries_its_eager_figure(tmp_path: Path) -> None:
    from ascend_setup.simulate.model_dirs import build_model

    ctx = Context("m", "", model_dir=build_model(tmp_path / "m"), card="910B3")
    ref = verdict.fit_reference(ctx, 4, 128, 128, 0.1)
    assert ref.tpot_ms and ref.eager_tpot_ms and ref.eager_tpot_ms > ref.tpot_ms
    assert ref.to_json()["eager_tpot_ms"] == ref.eager_tpot_ms
    assert "eager_tpot_ms" not in verdict.fit_reference(Context("m", ""), 4, 128, 128, 0.1).to_json()
