"""The figures serve reports, defined as `vllm bench serve` defines them."""

from __future__ import annotations

import pytest

from ascend_setup.serve.measure import PROMPT, fresh_prompt, percentile


@pytest.mark.parametrize(
    "values, share, want",
    [([1.0], 0.9, 1.0), ([1.0, 2.0], 0.5, 1.5), ([3.0, 1.0, 2.0, 4.0], 0.9, 3.7), ([5.0, 1.0], 0.0, 1.0)],
)
def test_percentiles_interpolate_between_ranks_as_numpy_does(values, share, want) -> None:
    assert percentile(values, share) == pytest.approx(want)


def test_every_timed_prompt_starts_with_a_block_the_server_has_not_seen() -> None:
    prompts = [fresh_prompt() for _ in range(50)]
    heads = {p.split()[0] for p in prompts}
    assert len(heads) == 50 and all(p.endswith(PROMPT) for p in prompts)


def test_each_timed_request_of_a_measurement_gets_its_own_fresh_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve's (and the demo's) TTFT is a real prefill: no timed request repeats another's first KV block."""
    from ascend_setup.serve import measure as module

    sent = []

    def fake_stream(url, body, timeout):
        sent.append(body["prompt"])
        yield 1.0, {"choices": [{"text": "a"}]}
        yield 1.1, {"choices": [{"text": "b"}], "usage": {"completion_tokens": 2}}

    monkeypatch.setattr(module, "stream", fake_stream)
    module.measure("http://127.0.0.1:1", "m", runs=3, max_tokens=2)
    assert len(sent) == 3 and len({p.split()[0] for p in sent}) == 3 and all(p.endswith(PROMPT) for p in sent)


def test_a_request_is_timed_by_vllm_bench_serves_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """As vLLM 0.23.0's benchmark (endpoint_request_func.py): TTFT at the first chunk with a choice even when its
    text is empty, ITL between such chunks, E2EL ending at the last of them (not at the usage chunk or [DONE])."""
    from types import SimpleNamespace

    from ascend_setup.serve import measure as module

    def fake_stream(url, body, timeout):
        yield 0.100, {"choices": [{"text": ""}]}  # a token that ends no character yet
        yield 0.120, {"choices": [{"text": "é"}]}
        yield 0.140, {"choices": [{"text": "b", "finish_reason": "length"}]}
        yield 0.400, {"choices": [], "usage": {"completion_tokens": 3}}

    clock = iter([0.0, 0.5])
    monkeypatch.setattr(module, "stream", fake_stream)
    monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    run = module.timed_completion("http://127.0.0.1:1", "m", 3, "p")
    assert run.ttft_s == pytest.approx(0.1) and run.e2el_s == pytest.approx(0.14)
    assert run.itl_ms == pytest.approx([20.0, 20.0]) and run.tpot_ms == pytest.approx(20.0)


def test_a_stream_with_one_timed_chunk_has_nothing_to_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from ascend_setup.serve import measure as module
    from ascend_setup.serve.smoke import RequestFailed

    def fake_stream(url, body, timeout):
        yield 0.1, {"choices": [{"text": "a b c"}], "usage": {"completion_tokens": 3}}

    monkeypatch.setattr(module, "stream", fake_stream)
    with pytest.raises(RequestFailed, match="3 token"):
        module.timed_completion("http://127.0.0.1:1", "m", 3, "p")
