"""fit's decode model over a batch: at one sequence it is the single-stream two-term model exactly; the weights
are read once a step whatever the batch, each sequence adds its KV; TPOT grows and throughput grows with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_setup.fit.batch import mean_context, step, step_of
from ascend_setup.fit.cards import card_for
from ascend_setup.fit.decode import Terms, bytes_per_token, predict
from ascend_setup.fit.model_files import local_files, weights
from ascend_setup.simulate.model_dirs import build_model


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory):
    return local_files(build_model(Path(tmp_path_factory.mktemp("m")) / "dense", "dense"))


def test_one_sequence_is_the_single_stream_model(dense) -> None:
    card = card_for("910B3")
    for tp, context in ((1, 1024), (1, 140), (2, 4096)):
        one = step(card.decode.terms(tp), dense, concurrency=1, context=context, bandwidth_gbps=card.peak_gbps, tp=tp)
        single = predict(card.decode.terms(tp), bytes_per_token(dense, context=context, tp=tp), card.peak_gbps)
        assert one.seconds == pytest.approx(single.seconds, rel=1e-12)


def test_the_weights_are_read_once_and_each_sequence_adds_its_kv(dense) -> None:
    card = card_for("910B3")
    terms = card.decode.terms()
    at = {c: step(terms, dense, concurrency=c, context=2048, bandwidth_gbps=card.peak_gbps) for c in (1, 4, 16)}
    w = weights(dense).per_token_bytes / (terms.eta * card.peak_gbps * 1e9)
    kv_one = at[1].kv_s
    assert kv_one > 0
    for c, s in at.items():
        assert s.weights_s == pytest.approx(w) and s.fixed_s == terms.t_fixed_s
        assert s.kv_s == pytest.approx(c * kv_one)
    assert at[1].tpot_ms < at[4].tpot_ms < at[16].tpot_ms  # each user slower
    assert at[1].throughput_tok_s < at[4].throughput_tok_s < at[16].throughput_tok_s  # the batch faster
    # the 8B's KV at 2,048 tokens is 288 MiB a sequence: at 16 the KV is about a third of the step's bytes
    assert 0.2 < at[16].kv_s / at[16].seconds < 0.4


def test_the_arithmetic() -> None:
    s = step_of(Terms(eta=0.5, t_fixed_s=0.002), 1e9, 1e8, 1000, 4)
    assert s.weights_s == pytest.approx(0.002) and s.kv_s == pytest.approx(0.0008)
    assert s.tpot_ms == pytest.approx(4.8) and s.throughput_tok_s == pytest.approx(4 / 0.0048)
    assert s.to_json()["concurrency"] == 4
    with pytest.raises(ValueError):
        step_of(Terms(0.5, 0.0), 1e9, 1e8, 1000, 0)
    assert mean_context(128, 24) == 140
