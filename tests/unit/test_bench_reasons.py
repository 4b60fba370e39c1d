"""bench's reasons for a gap: each rule fires on its evidence and stays quiet without it."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from ascend_setup.bench.reasons import (
    Evidence,
    LevelEvidence,
    TpOption,
    TpStep,
    Watch,
    clock_below,
    clock_reader,
    eager_mode,
    eager_speed,
    max_num_seqs_capped,
    metrics,
    no_graph_capture,
    other_process,
    preempted,
    preemptions_total,
    prefix_cached,
    reasons,
    samples,
    speculative,
    tp_wider,
)

ENGINE = (
    "(EngineCore_DP0 pid=4121) INFO 12-01 09:12:21 [core.py:93] Initializing a V1 LLM engine (v0.23.0) with "
    "config: model='/m', speculative_config={spec}, tokenizer='/m', dtype=torch.bfloat16, max_seq_len=32768, "
    "tensor_parallel_size=2, quantization=None, enforce_eager={eager}, kv_cache_dtype=auto\n"
)
CAPTURED = (
    "(EngineCore_DP0 pid=4121) INFO 12-01 09:12:40 [gpu_model_runner.py:4587] Capturing CUDA graphs (decode, "
    "FULL): 100%|##########| 35/35 [00:02<00:00, 15.2it/s]\n"
    "(EngineCore_DP0 pid=4121) INFO 12-01 09:12:43 [model_runner.py:3520] Graph capturing finished in 3 secs\n"
)
STARTED = (
    "(EngineCore_DP0 pid=4121) INFO 12-01 09:12:44 [core.py:210] init engine (profile, create kv cache, "
    "warmup model) took 30.12 seconds\n"
)


def log(eager: str = "False", spec: str = "None", captured: bool = True, started: bool = True) -> str:
    return ENGINE.format(eager=eager, spec=spec) + (CAPTURED if captured else "") + (STARTED if started else "")


@pytest.mark.parametrize(
    "argv",
    [
        "vllm serve /m --enforce-eager",
        "vllm serve /m --enforce_eager --port 8000",
        "vllm serve /m --enforce-eager=true",
    ],
)
def test_eager_mode_fires_on_the_flag(argv: str) -> None:
    reason = eager_mode(argv)
    assert reason is not None and reason.rule == "eager-mode" and "--enforce-eager" in reason.fix


@pytest.mark.parametrize(
    "argv",
    [
        "",
        "vllm serve /m --port 8000",
        "vllm serve /m --enforce-eager=false",
        "vllm serve /m --no-enforce-eager",
        "vllm serve /m --served-model-name enforce-eager",
    ],
)
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
    eager = ["vllm", "serve", "/m", "--enforce-eager"]
    found = reasons(Evidence(eager, None, False, [LevelEvidence(16, preemptions=2.0)]))
    assert [r.rule for r in found] == ["eager-mode", "preemptions"]
    assert found[1].levels == [16] and found[0].levels is None
    assert (
        reasons(
            Evidence(["vllm", "serve", "/m"], log(), False, [LevelEvidence(16, 20.0, 0.0, 0.0, 512.0, 0.0, 18.0, 60.0)])
        )
        == []
    )
    assert reasons(Evidence()) == []  # a bare URL whose /metrics says nothing


# --- eager mode from the log, and from a speed near fit's eager figure ---


def test_eager_mode_fires_on_the_engine_start_up_line_and_any_spelling_vllm_reads() -> None:
    reason = eager_mode("vllm serve /m", log(eager="True"))
    assert reason is not None and "enforce_eager=True" in reason.evidence
    assert eager_mode("vllm serve /m --enforce-e") is not None  # a unique prefix is the flag, as vLLM reads it


def test_eager_mode_is_quiet_on_a_graph_mode_log_or_none() -> None:
    assert eager_mode("vllm serve /m", log(eager="False")) is None
    assert eager_mode("vllm serve /m", "no engine line here\n") is None


def test_eager_speed_fires_when_tpot_sits_at_fits_eager_figure() -> None:
    reason = eager_speed(
        [
            LevelEvidence(1, tpot_ms=58.0, fit_tpot_ms=17.0, fit_eager_tpot_ms=60.0),
            LevelEvidence(4, tpot_ms=19.0, fit_tpot_ms=18.0, fit_eager_tpot_ms=61.0),
        ]
    )
    assert reason is not None and reason.rule == "eager-speed" and reason.levels == [1]
    assert "58 ms at concurrency 1" in reason.evidence


@pytest.mark.parametrize(
    "level",
    [
        LevelEvidence(1, tpot_ms=18.0, fit_tpot_ms=17.0, fit_eager_tpot_ms=60.0),  # at the graph figure
        LevelEvidence(1, tpot_ms=200.0, fit_tpot_ms=17.0, fit_eager_tpot_ms=60.0),  # far slower than either
        LevelEvidence(
            1, tpot_ms=60.0, fit_tpot_ms=55.0, fit_eager_tpot_ms=60.0
        ),  # the two figures cannot be told apart
        LevelEvidence(1, tpot_ms=60.0),  # no fit (a bare URL)
    ],
)
def test_eager_speed_is_quiet_without_that_evidence(level: LevelEvidence) -> None:
    assert eager_speed([level]) is None


def test_eager_speed_is_left_out_when_the_command_already_says_eager() -> None:
    slow = [LevelEvidence(1, tpot_ms=58.0, fit_tpot_ms=17.0, fit_eager_tpot_ms=60.0)]
    assert [r.rule for r in reasons(Evidence(["vllm", "serve", "/m"], None, False, slow))] == ["eager-speed"]
    assert [r.rule for r in reasons(Evidence(["vllm", "serve", "/m", "--enforce-eager"], None, False, slow))] == [
        "eager-mode"
    ]


# --- no graph capture ---


def test_no_graph_capture_fires_on_a_started_graph_mode_log_without_capture_lines() -> None:
    reason = no_graph_capture("vllm serve /m", log(captured=False))
    assert reason is not None and reason.rule == "no-graph-capture" and "Capturing CUDA graphs" in reason.evidence


@pytest.mark.parametrize(
    "argv, text",
    [
        ("vllm serve /m", None),  # no log (a bare URL)
        ("vllm serve /m", log()),  # captured
        ("vllm serve /m", log(captured=False, started=False)),  # the log stops before the engine started
        ("vllm serve /m --enforce-eager", log(eager="True", captured=False)),  # eager: that reason says it
        ("vllm serve /m", "(EngineCore_DP0 pid=1) INFO [model_runner.py:3520] Capturing ACL graphs ...\n" + STARTED),
    ],
)
def test_no_graph_capture_is_quiet_without_it(argv: str, text: str) -> None:
    assert no_graph_capture(argv, text) is None


# --- prefix caching hiding prefill ---


def test_prefix_cache_fires_on_the_flag_or_hits_growing() -> None:
    flag = prefix_cached(True, [LevelEvidence(1)])
    assert flag is not None and flag.rule == "prefix-cache" and "--prefix-cache" in flag.evidence
    assert flag.effect == "faster" and flag.levels is None
    hits = prefix_cached(
        False,
        [
            LevelEvidence(1, prefix_hits=0.0, prefix_queries=2048.0),
            LevelEvidence(4, prefix_hits=1536.0, prefix_queries=2048.0),
        ],
    )
    assert hits is not None and hits.levels == [4] and "1536 of 2048 prompt tokens at concurrency 4" in hits.evidence


@pytest.mark.parametrize(
    "levels",
    [
        [],
        [LevelEvidence(1)],
        [LevelEvidence(1, prefix_hits=0.0, prefix_queries=900.0)],
        [LevelEvidence(1, prefix_hits=16.0, prefix_queries=2048.0)],
    ],
)  # under 10%
def test_prefix_cache_is_quiet_without_it(levels: list) -> None:
    assert prefix_cached(False, levels) is None


# --- --max-num-seqs capping the batch ---


@pytest.mark.parametrize(
    "argv",
    [
        "vllm serve /m --max-num-seqs 8",
        "vllm serve /m --max_num_seqs=8",
        "vllm serve /m --max-num-seq 8",
        "vllm serve /m --max-num-seqs 32 --max-num-seqs 8",
    ],
)
def test_max_num_seqs_fires_on_a_cap_below_a_level_in_any_spelling(argv: str) -> None:
    reason = max_num_seqs_capped(argv, [LevelEvidence(1), LevelEvidence(4), LevelEvidence(16)])
    assert reason is not None and reason.rule == "max-num-seqs" and reason.levels == [16]
    assert "--max-num-seqs 8 is below concurrency 16" in reason.evidence


def test_max_num_seqs_fires_on_requests_waiting() -> None:
    reason = max_num_seqs_capped("", [LevelEvidence(4, waiting=0.0), LevelEvidence(16, waiting=6.0)])
    assert reason is not None and reason.levels == [16] and "num_requests_waiting reached 6" in reason.evidence


@pytest.mark.parametrize(
    "argv, levels",
    [
        ("vllm serve /m --max-num-seqs 16", [LevelEvidence(1), LevelEvidence(16, waiting=0.0)]),
        ("vllm serve /m", [LevelEvidence(64)]),  # vLLM's default: bench does not guess it
        ("", [LevelEvidence(16, waiting=None)]),
        ("vllm serve /m --served-model-name max-num-seqs", [LevelEvidence(16)]),
    ],
)
def test_max_num_seqs_is_quiet_without_it(argv: str, levels: list) -> None:
    assert max_num_seqs_capped(argv, levels) is None


# --- MTP or speculative decoding ---


@pytest.mark.parametrize(
    "argv",
    [
        'vllm serve /m --speculative-config {"method":"mtp","num_speculative_tokens":1}',
        "vllm serve /m --speculative_config.method=mtp",
        "vllm serve /m --speculative-config.method ngram",
    ],
)
def test_speculative_fires_on_the_config_in_any_spelling(argv: str) -> None:
    reason = speculative(argv)
    assert reason is not None and reason.rule == "speculative-decoding" and reason.effect == "either"


def test_speculative_fires_on_the_engine_start_up_line() -> None:
    reason = speculative("", log(spec="SpeculativeConfig(method='mtp', num_spec_tokens=1)"))
    assert reason is not None and "speculative_config=SpeculativeConfig" in reason.evidence


@pytest.mark.parametrize(
    "argv, text", [("vllm serve /m", log()), ("", None), ("vllm serve /m --served-model-name speculative-config", None)]
)
def test_speculative_is_quiet_without_it(argv: str, text: str) -> None:
    assert speculative(argv, text) is None


def test_a_reason_concerns_the_gap_it_can_explain() -> None:
    argv = ["vllm", "serve", "/m", "--max-num-seqs", "4"]
    found = reasons(Evidence(argv, None, True, [LevelEvidence(1), LevelEvidence(16)]))
    cap, cache = found
    assert cap.concerns(16, "slower than predicted") and not cap.concerns(1, "slower than predicted")
    assert not cap.concerns(16, "faster than predicted") and not cap.concerns(16, "as predicted")
    assert cache.concerns(1, "faster than predicted") and not cache.concerns(1, "slower than predicted")


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
    metrics_url["page"]["text"] = (
        '# TYPE vllm:num_preemptions_total counter\n'
        'vllm:num_preemptions_total{engine="0",model_name="m"} 3.0\n'
        'vllm:num_preemptions_total{engine="1",model_name="m"} 2.0\n'
    )
    assert preemptions_total(metrics_url["url"]) == 5.0
    metrics_url["page"]["text"] = "vllm:prompt_tokens_total 12.0\n"  # a server that does not count them
    assert preemptions_total(metrics_url["url"]) is None
    assert preemptions_total(metrics_url["url"] + "/nowhere") is None  # 404


def test_metrics_are_summed_over_engines_and_counters_and_gauges_read(metrics_url: dict) -> None:
    metrics_url["page"]["text"] = (
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 128.0\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 64.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\n'
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 9.0\n'
        'vllm:gpu_cache_usage_perc NaN\n'
    )
    got = metrics(metrics_url["url"])
    assert got == {"vllm:prefix_cache_hits_total": 192.0, "vllm:num_requests_waiting": 3.0}
    assert metrics(metrics_url["url"] + "/nowhere") is None
    assert samples("no metrics here") == {}


def test_the_watch_keeps_the_most_a_gauge_read_during_a_level() -> None:
    reads = iter([{"vllm:num_requests_waiting": 0.0}, {"vllm:num_requests_waiting": 5.0}, None])
    with Watch(lambda: next(reads, {"vllm:num_requests_waiting": 1.0}), every=0.01) as watch:
        time.sleep(0.2)
    assert watch.most == {"vllm:num_requests_waiting": 5.0}


# --- another process on the card ---


def test_another_process_fires_on_a_process_on_the_servers_card_that_is_not_its_own() -> None:
    reason = other_process([0], {0: ["4100 python3", "5151 python3"], 1: ["7 other"]}, [4100, 4121])
    assert reason is not None and reason.rule == "another-process"
    assert "5151 python3 on card 0" in reason.evidence and "7 other" not in reason.evidence


@pytest.mark.parametrize(
    "cards, busy, own",
    [
        ([0], {0: ["4100 python3", "4121 VLLM::EngineCore"]}, [4100, 4121]),  # the server's own
        ([0], {1: ["7 other"]}, [4100]),  # on another card
        ([0], None, [4100]),  # npu-smi not read (no NPU driver, or a bare URL)
        ([], {0: ["7 other"]}, []),  # the server's cards unknown
    ],
)
def test_another_process_is_quiet_without_it(cards: list, busy: dict, own: list) -> None:
    assert other_process(cards, busy, own) is None


# --- TP wider than a launch-bound model needs ---

GIB = 2**30


def tp_step(
    c: int = 1,
    tp: int = 2,
    fixed: float = 18.0,
    tpot: float = 25.0,
    small_tpot: float = 17.6,
    per_card: float = 20 * GIB,
    capacity: float = 55 * GIB,
) -> TpStep:
    return TpStep(c, tp, fixed, tpot, [TpOption(1, small_tpot, per_card)], capacity)


def test_tp_wider_fires_on_a_launch_bound_step_that_a_smaller_tp_holding_the_model_beats() -> None:
    reason = tp_wider([tp_step(1), tp_step(16, fixed=18.0, tpot=40.0, small_tpot=45.0)])
    assert reason is not None and reason.rule == "tp-wider-than-needed" and reason.levels == [1]
    assert "TP 2 (from the server's command)" in reason.evidence and "18 of 25 ms" in reason.evidence
    assert "--tensor-parallel-size 1" in reason.fix and reason.effect == "slower"


def test_tp_wider_picks_the_fastest_smaller_tp_that_fits() -> None:
    step = TpStep(
        1,
        8,
        18.0,
        20.0,
        [TpOption(1, 12.0, 80 * GIB), TpOption(2, 15.0, 40 * GIB), TpOption(4, 16.0, 20 * GIB)],
        55 * GIB,
    )
    reason = tp_wider([step])
    assert reason is not None and "--tensor-parallel-size 2" in reason.fix


@pytest.mark.parametrize(
    "step",
    [
        tp_step(tp=1),  # TP 1 already
        tp_step(fixed=10.0, tpot=25.0),  # bandwidth-bound: the fixed cost is under half the step
        tp_step(small_tpot=26.0),  # the smaller TP is not faster
        tp_step(per_card=60 * GIB),  # the model does not fit the smaller TP
        TpStep(1, 2, 18.0, 25.0, [], 55 * GIB),  # no smaller TP the heads divide by
    ],
)
def test_tp_wider_is_quiet_without_it(step: TpStep) -> None:
    assert tp_wider([step]) is None
    assert tp_wider([]) is None


def test_tp_steps_come_from_fit_for_the_commands_tp_in_any_spelling(tmp_path: Path) -> None:
    from ascend_setup.bench import verdict
    from ascend_setup.simulate.model_dirs import build_model

    small = build_model(tmp_path / "m", weight_bytes=2 * 10**9)
    for command in (
        "vllm serve /m --tensor-parallel-size 4",
        "vllm serve /m -tp=4",
        "vllm serve /m --tensor_parallel_size 4",
    ):
        ctx = verdict.Context("m", command, model_dir=small, card="910B3")
        (step,) = verdict.tp_steps(ctx, [1], 128, 128)
        assert step.tp == 4 and step.tp_from == "the server's command" and [o.tp for o in step.options] == [1, 2]
        reason = tp_wider([step])
        assert reason is not None and "--tensor-parallel-size 1" in reason.fix, command
    # TP 1, no fit facts: nothing to judge; a 60 GB model at TP 2 does not fit one card: quiet
    assert verdict.tp_steps(verdict.Context("m", "vllm serve /m", model_dir=small, card="910B3"), [1], 128, 128) == []
    assert verdict.tp_steps(verdict.Context("m", "vllm serve /m -tp 4"), [1], 128, 128) == []
    big = build_model(tmp_path / "big", weight_bytes=60 * 10**9)
    steps = verdict.tp_steps(verdict.Context("m", "vllm serve /m -tp 2", model_dir=big, card="910B3"), [1], 128, 128)
    assert tp_wider(steps) is None


# --- a card below its nominal AI Core clock ---


def clocked(c: int, current: float, usage: float = 85.0, rated: float = 1800.0) -> LevelEvidence:
    return LevelEvidence(c, clocks={"0 rated_mhz": rated, "0 current_mhz": current, "0 usage_pct": usage})


def test_clock_below_fires_on_a_busy_card_under_its_rated_clock() -> None:
    reason = clock_below([clocked(1, 1800.0), clocked(4, 1200.0)])
    assert reason is not None and reason.rule == "clock-below-nominal" and reason.levels == [4]
    assert "card 0 at most 1200 of its rated 1800 MHz at concurrency 4" in reason.evidence
    assert [r.rule for r in reasons(Evidence(levels=[clocked(4, 1200.0)]))] == ["clock-below-nominal"]


@pytest.mark.parametrize(
    "level",
    [
        clocked(1, 1800.0),  # at the rated clock
        clocked(1, 1750.0),  # within CLOCK_SHORT of it
        clocked(1, 100.0, usage=0.0),  # idle: the card lowers its clock (Huawei's example: 100 of 1650 MHz)
        LevelEvidence(1, clocks={"0 current_mhz": 1200.0, "0 usage_pct": 85.0}),  # no rated clock printed
        LevelEvidence(1),  # not read (a bare URL, or no npu-smi)
    ],
)
def test_clock_below_is_quiet_without_it(level: LevelEvidence) -> None:
    assert clock_below([level]) is None


def test_the_clocks_are_read_from_npu_smi_during_a_level(tmp_path: Path) -> None:
    from ascend_setup.simulate.fake_cann import build_fake_cann

    fake = build_fake_cann(tmp_path / "Ascend")
    (fake.driver / "npu-clocks").write_text("1 1800 1200 85\n")
    read = clock_reader([1], str(fake.driver))
    with Watch(read, names=(), every=0.05) as watch:
        time.sleep(0.3)
    assert watch.most == {"1 rated_mhz": 1800.0, "1 current_mhz": 1200.0, "1 usage_pct": 85.0}
    reason = clock_below([LevelEvidence(4, clocks=watch.most)])
    assert reason is not None and reason.levels == [4]


def test_the_sweep_keeps_the_clocks_read_during_each_level() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from ascend_setup.bench.sweep import Level, sweep

    def runner(*_: Any) -> Level:
        time.sleep(0.1)
        return Level(1, 1, 0.1, 10.0, 10.0, cast(Any, SimpleNamespace(tpot_ms=5.0)))

    done = sweep(
        "http://x",
        "m",
        concurrency=[1],
        requests=1,
        input_len=8,
        output_len=8,
        prefix_cache=False,
        budget_s=5,
        slo_tpot_ms=None,
        progress=lambda _: None,
        runner=runner,
        clocks=lambda: {"0 current_mhz": 1200.0},
    )
    assert done[0].clocks == {"0 current_mhz": 1200.0}
    no_clocks = sweep(
        "http://x",
        "m",
        concurrency=[1],
        requests=1,
        input_len=8,
        output_len=8,
        prefix_cache=False,
        budget_s=5,
        slo_tpot_ms=None,
        progress=lambda _: None,
        runner=runner,
    )
    assert no_clocks[0].clocks is None
