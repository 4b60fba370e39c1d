"""The figures serve reports, defined as `vllm bench serve` defines them."""

from __future__ import annotations

import pytest

from ascend_setup.serve.measure import PROMPT, fresh_prompt, percentile


@pytest.mark.parametrize("values, share, want", [([1.0], 0.9, 1.0), ([1.0, 2.0], 0.5, 1.5),
                                                 ([3.0, 1.0, 2.0, 4.0], 0.9, 3.7), ([5.0, 1.0], 0.0, 1.0)])
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
