"""bench's reasons for a gap: each rule fires on its evidence and stays quiet without it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from ascend_setup.bench.reasons import eager_mode, preempted, preemptions_total, reasons


@pytest.mark.parametrize("argv", ["vllm serve /m --enforce-eager", "vllm serve /m --enforce_eager --port 8000",
                                  "vllm serve /m --enforce-eager=true"])
def test_eager_mode_fires_on_the_flag(argv: str) -> None:
    reason = eager_mode(argv)
    assert reason is not None and reason.rule == "eager-mode" and "--enforce-eager" in reason.fix


@pytest.mark.parametrize("argv", ["", "vllm serve /m --port 8000", "vllm serve /m --enforce-eager=false",
                                  "vllm serve /m --no-enforce-eager",
                                  "vllm serve /m --served-model-name enforce-eager"])
def test_eager_mode_is_quiet_without_it(argv: str) -> None:
    assert eager_mode(argv) is None


def test_preemptions_fire_on_a_level_whose_counter_grew() -> None:
    reason = preempted([(1, 0.0), (4, 0.0), (16, 7.0)])
    assert reason is not None and reason.rule == "preemptions"
    assert "7 at concurrency 16" in reason.evidence and "concurrency 16" in reason.fix


@pytest.mark.parametrize("grown", [[], [(1, 0.0), (16, 0.0)], [(1, None), (16, None)]])
def test_preemptions_are_quiet_when_the_counter_stayed_or_is_unknown(grown: list) -> None:
    assert preempted(grown) is None


def test_both_together_and_neither() -> None:
    assert [r.rule for r in reasons("vllm serve /m --enforce-eager", [(16, 2.0)])] == ["eager-mode", "preemptions"]
    assert reasons("vllm serve /m", [(16, 0.0)]) == []


@pytest.fixture
def metrics_url() -> Iterator[dict]:
    page = {"text": ""}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page["text"].encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"url": f"http://127.0.0.1:{server.server_address[1]}", "page": page}
    server.shutdown()
    server.server_close()


def test_the_counter_is_read_from_metrics_and_summed_over_engines(metrics_url: dict) -> None:
    metrics_url["page"]["text"] = ('# TYPE vllm:num_preemptions_total counter\n'
                                   'vllm:num_preemptions_total{engine="0",model_name="m"} 3.0\n'
                                   'vllm:num_preemptions_total{engine="1",model_name="m"} 2.0\n')
    assert preemptions_total(metrics_url["url"]) == 5.0
    metrics_url["page"]["text"] = "vllm:prompt_tokens_total 12.0\n"  # a server that does not count them
    assert preemptions_total(metrics_url["url"]) is None
    assert preemptions_total(metrics_url["url"] + "/nowhere") is None  # 404
