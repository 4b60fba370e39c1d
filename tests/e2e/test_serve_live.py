"""serve against the real packages of the public index: the vLLM 0.23.0 wheel (installed --no-deps with only what
its CLI imports, a CPU torch, and the CPU platform forced) and the vllm-ascend 0.23.0 / 0.23.0.post1 sdists.

- every command `serve --dry-run` composes, for each family at TP 1 and at a TP the 0.23.0 tutorials use, parses
  with vLLM's own parser, `validate_parsed_serve_args` and `AsyncEngineArgs.from_cli_args`, and its
  additional_config passes the key check against the real sources;
- our reading of vLLM's parser (serve/vllm_args.py) equals the real one on every spelling case, and the shipped
  flag table equals the one regenerated from the wheel;
- the real sources' key sets equal the simulated host's stub's, and stale, typo'd and unread names are refused.

The downloads and the venv are kept in pytest's cache (`.pytest_cache/d/serve-live`): the first run is cold.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers.serving import serving_venv

from ascend_setup.errors import BadInput
from ascend_setup.index.download import download
from ascend_setup.index.pipconfig import configured_index
from ascend_setup.index.simple import SimpleIndex
from ascend_setup.serve.flag_table import serve_flags
from ascend_setup.serve.keys import installed_keys
from ascend_setup.serve.user_args import CONFIG, config_object
from ascend_setup.serve.validate import check_against
from ascend_setup.serve.vllm_args import ServeArgsError, parse_serve
from ascend_setup.simulate.model_dirs import CONFIGS, build_model
from ascend_setup.simulate.stub_plugin_config import FILES

ROOT = Path(__file__).resolve().parents[2]
WHEEL = "vllm-0.23.0-2-cp38-abi3-manylinux_2_28_x86_64.whl"  # the rebuild (build tag 2), which pip picks
SDISTS = ("vllm_ascend-0.23.0.tar.gz", "vllm_ascend-0.23.0.post1.tar.gz")
#: What `vllm.entrypoints.cli.serve` imports beyond vllm itself (found by importing it in a venv holding only
#: vllm --no-deps and torch, one missing module at a time); installed at vllm's own specifiers.
CLI_DEPS = (
    "numpy",
    "packaging",
    "regex",
    "psutil",
    "uvloop",
    "fastapi",
    "cbor2",
    "pyzmq",
    "urllib3",
    "transformers",
    "gguf",
    "aiohttp",
    "openai-harmony",
    "openai",
    "msgspec",
    "cloudpickle",
    "pillow",
    "pybase64",
    "cachetools",
    "py-cpuinfo",
    "prometheus-client",
    "llguidance",
    "xgrammar",
    "uvicorn",
    "watchfiles",
    "partial-json-parser",
    "ijson",
    "mistral-common",
    "model-hosting-container-standards",
)
#: A TP the 0.23.0 tutorials run each family at (Qwen3-32B TP4, Qwen3-VL-30B TP2, Qwen3-30B-A3B TP4,
#: Qwen3.5-27B TP2, DeepSeek-V3.1 TP8 on one A3 node, ModelSlim W8A8 TP2).
TUTORIAL_TP = {"dense": 4, "vision": 2, "moe": 4, "hybrid": 2, "mla": 8, "modelslim": 2}
#: The spellings vLLM's FlexibleArgumentParser reads, and what it refuses.
SPELLINGS: List[List[str]] = [
    ["--served_model_name", "foo"],
    ["--served-model", "foo"],
    ["--served-model-name", "a", "b"],
    ["--additional_config", '{"a": 1}'],
    ["--additional-config.a=1", "--additional-config.b.c", "true"],
    ["--additional-config", '{"a": {"x": 1}}', "--additional-config.a.y=2"],
    ["--additional-config", '{"a": 1}', "--additional-config", '{"b": 2}'],
    ["--additional-config", "{bad"],
    ["--additional-config", "{bad}"],
    ["--additional-config", "[1]"],
    ["--additional-config.list+", "a,b"],
    ["--additional-conf", '{"a": 1}'],
    ["--max-model-len", "32k"],
    ["--max_model_len=auto"],
    ["--max-model-len", "1.5K"],
    ["--max-model", "4096"],
    ["--max", "4096"],
    ["--no-such-flag"],
    ["--port", "8000", "--port", "9000"],
    ["-tp", "2"],
    ["--enable-prefix-caching", "--no-enable-prefix-caching"],
    ["--no-enable-prefix", "--host", "127.0.0.1"],
    ["-O3"],
    ["stray"],
    ["--gpu-memory-utilization", "x"],
    ["--async-scheduling"],
]
DESTS = (
    "model_tag",
    "served_model_name",
    "additional_config",
    "max_model_len",
    "port",
    "host",
    "tensor_parallel_size",
    "enable_prefix_caching",
    "optimization_level",
    "enforce_eager",
    "async_scheduling",
    "gpu_memory_utilization",
    "quantization",
    "enable_expert_parallel",
)

#: Run in the venv of the real vLLM: each argv through its parser, `validate_parsed_serve_args` and, with
#: `engine`, `AsyncEngineArgs.from_cli_args`; the outcome of each, as JSON, to the file argv[2].
REAL = r'''
import contextlib, io, json, runpy, sys
cases, out, engine = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3] == "engine"
dests = %r
top, _ = runpy.run_path(%r)["serve_parser"]()
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.openai.cli_args import validate_parsed_serve_args
results = []
for argv in cases:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = top.parse_args(["serve", *argv])
        validate_parsed_serve_args(ns)
        if engine:
            AsyncEngineArgs.from_cli_args(ns)
        results.append({"ok": {d: getattr(ns, d, None) for d in dests}})
    except SystemExit as exc:
        results.append({"exit": exc.code, "error": err.getvalue().strip().splitlines()[-1]})
json.dump(results, open(out, "w"), default=str)
'''


def _pip(python: Path, *args: str) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args], check=True, timeout=1800
    )


@pytest.fixture(scope="module")
def real(request: pytest.FixtureRequest) -> Dict[str, Any]:
    """The wheel, the sdists unpacked, and a venv whose vLLM CLI imports (kept in pytest's cache)."""
    cache = Path(request.config.cache.mkdir("serve-live"))
    index = SimpleIndex(configured_index())
    (wheel,) = [f for f in index.project("vllm").files if f.filename == WHEEL]
    plugin = index.project("vllm-ascend").files
    for found in [wheel] + [f for f in plugin if f.filename in SDISTS]:
        if not (cache / found.filename).exists():
            download([found.url], cache / found.filename, sha256=found.sha256, size=found.size)
    sources = {}
    for name in SDISTS:
        version = name[len("vllm_ascend-") : -len(".tar.gz")]
        if not (cache / "src" / f"vllm_ascend-{version}").is_dir():
            with tarfile.open(cache / name) as archive:
                archive.extractall(cache / "src", filter="data")
        sources[version] = cache / "src" / f"vllm_ascend-{version}" / "vllm_ascend"
    venv = cache / "venv"
    python = venv / "bin" / "python"
    if not (venv / "ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        _pip(python, "torch==2.13.0")  # the CPU build on this machine's disk; the flags do not need vLLM's 2.11
        _pip(python, "--no-deps", str(cache / wheel.filename))
        wanted = {_name(r): r.split(";")[0].strip() for r in _requires(python) if "extra ==" not in r}
        _pip(python, *[wanted.get(d, d).replace("fastapi[standard]", "fastapi") for d in CLI_DEPS])
        (venv / "ready").write_text("")
    return {"python": python, "sources": sources}


def _name(requirement: str) -> str:
    return re.split(r"[ <>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _requires(python: Path) -> List[str]:
    out = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, json; print(json.dumps(m.requires('vllm')))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def real_outcomes(real: Dict[str, Any], cases: List[List[str]], tmp_path: Path, engine: bool) -> List[dict]:
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    script = REAL % (DESTS, str(ROOT / "dev" / "vllm_serve_flags.py"))
    proc = subprocess.run(
        [
            str(real["python"]),
            "-c",
            script,
            str(tmp_path / "cases.json"),
            str(tmp_path / "out.json"),
            "engine" if engine else "parse",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp_path / "out.json").read_text())


def our_outcome(argv: List[str]) -> dict:
    try:
        ns = vars(parse_serve(serve_flags(), argv))
    except ServeArgsError as exc:
        return {"exit": 2, "error": str(exc)}
    return {"ok": {d: ns.get(d) for d in DESTS}}


def _same_message(outcome: dict) -> dict:
    """vLLM names its JSON converter by its repr (`<function loads at 0x7f...>`); we name it JSON."""
    if "error" in outcome:
        return {**outcome, "error": re.sub(r"<function loads at 0x[0-9a-f]+>", "JSON", outcome["error"])}
    return json.loads(json.dumps(outcome, default=str))


@pytest.mark.live
def test_our_reading_of_the_parser_equals_vllms_own(real: Dict[str, Any], tmp_path: Path) -> None:
    cases = [["model", *case] for case in SPELLINGS]
    theirs = real_outcomes(real, cases, tmp_path, engine=False)
    mine = [our_outcome(case) for case in cases]
    differ = [(case, t, m) for case, t, m in zip(cases, theirs, map(_same_message, mine)) if _same_message(t) != m]
    assert not differ, differ
    subprocess.run(
        [str(real["python"]), str(ROOT / "dev" / "vllm_serve_flags.py"), str(tmp_path / "flags.json")],
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert json.loads((tmp_path / "flags.json").read_text())["flags"] == serve_flags()


@pytest.mark.live
def test_every_composed_command_parses_with_the_real_vllm_and_its_keys_with_the_real_sources(
    real: Dict[str, Any], tmp_path: Path, cli
) -> None:
    venv = serving_venv(tmp_path / "serving")
    cases, configs = [], []
    for family in sorted(CONFIGS):
        model = build_model(tmp_path / "models" / family, family)
        for tp in (1, TUTORIAL_TP[family]):
            proc = cli(
                "serve",
                str(model),
                "--dry-run",
                "--json",
                "--venv",
                str(venv),
                "--workdir",
                str(tmp_path / "wd"),
                "--tp",
                str(tp),
            )
            assert proc.returncode == 0, (family, tp, proc.stderr)
            plan = json.loads(proc.stdout)
            cases.append(plan["argv"][2:])
            configs.append((family, tp, plan))
    outcomes = real_outcomes(real, cases, tmp_path, engine=True)
    for (family, tp, plan), outcome, argv in zip(configs, outcomes, cases):
        assert "ok" in outcome, (family, tp, outcome)
        parsed = outcome["ok"]
        assert parsed["tensor_parallel_size"] == tp and parsed["host"] == "127.0.0.1"
        assert parsed["served_model_name"] == [plan["served_name"]] and parsed["max_model_len"] == plan["max_model_len"]
        assert _same_message(our_outcome(argv)) == _same_message(outcome), (family, tp)
        for version, source in real["sources"].items():
            check_against(
                installed_keys(source, version), config=config_object(parsed[CONFIG], family), env={}, user_env={}
            )


@pytest.mark.live
def test_the_real_sdists_key_sets_and_refusals(real: Dict[str, Any], tmp_path: Path) -> None:
    stub = tmp_path / "stub"
    for path, text in FILES.items():
        (stub / path).parent.mkdir(parents=True, exist_ok=True)
        (stub / path).write_text(text)
    mine = installed_keys(stub / "vllm_ascend", "0.23.0")
    for version, source in real["sources"].items():
        keys = installed_keys(source, version)
        assert (keys.keys, keys.sub_keys, keys.env, keys.deprecated_env, keys.types) == (
            mine.keys,
            mine.sub_keys,
            mine.env,
            mine.deprecated_env,
            mine.types,
        ), version
        assert len(keys.keys) > 30 and "fuse_qknorm_rope" in keys.sub_keys["ascend_compilation_config"]
        assert {"enable_dsa_cp", "enable_hamming_sparse"} <= keys.keys  # utils.py, attention/kvcomp_attn
        assert keys.types["enable_flashcomm1"] == "bool" and not keys.deprecated and not keys.removed
        assert check_against(keys, config={"enable_dsa_cp": True}, env={"VLLM_ASCEND_ENABLE_MLAPO": "0"}, user_env={})[
            0
        ].startswith("variable VLLM_ASCEND_ENABLE_MLAPO is deprecated")
        with pytest.raises(BadInput, match="reads it as a bool"):
            check_against(keys, config={"enable_flashcomm1": "false"}, env={}, user_env={})
        for config, env, words in (
            ({"torchair_graph_config": {"enabled": True}}, {}, "removed in 0.12.0rc1"),
            (
                {"ascend_compilation_config": {"enable_npu_graph_ex": False}},
                {},
                "did you mean ascend_compilation_config.enable_npugraph_ex?",
            ),
            ({}, {"VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE": "1"}, "VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE is not read"),
        ):
            with pytest.raises(BadInput, match=words.replace("?", r"\?")):
                check_against(keys, config=config, env=env, user_env={})


#: Run in the venv of the real vLLM: each (model path, JSON) validated by vLLM 0.23.0's own pydantic model.
MODELS = r'''
import importlib, json, sys
failed = []
for where, document in json.load(open(sys.argv[1])):
    module, name = where.rsplit(".", 1)
    try:
        getattr(importlib.import_module(module), name).model_validate(document)
    except Exception as exc:
        failed.append("%s: %s" % (name, str(exc)[:400]))
print(json.dumps(failed))
'''
PROTOCOL = "vllm.entrypoints.openai"


@pytest.mark.live
def test_the_stubs_requests_and_responses_fit_the_real_vllms_models(real: Dict[str, Any], tmp_path: Path) -> None:
    """What serve sends (smoke, measure) and what the stub answers, validated by vLLM 0.23.0's protocol models."""
    import os
    import socket
    import time
    import urllib.request

    from ascend_setup.serve.measure import fresh_prompt
    from ascend_setup.serve.run import http_get
    from ascend_setup.serve.smoke import PROMPT

    model = build_model(tmp_path / "dense", "dense")
    documents: List[Any] = []
    for shadowed in (False, True):
        venv = serving_venv(tmp_path / f"venv-{shadowed}", shadowed=shadowed)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        proc = subprocess.Popen(
            [
                str(venv / "bin" / "vllm"),
                "serve",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--served-model-name",
                "m",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "VLLM_SIM_PHASE_SECONDS": "0.01"},
        )
        base = f"http://127.0.0.1:{port}"
        try:
            end = time.monotonic() + 30
            while http_get(f"{base}/health") is None and time.monotonic() < end:
                time.sleep(0.05)
            requests = [
                (
                    "/v1/completions",
                    "completion.protocol.CompletionRequest",
                    {
                        "model": "m",
                        "prompt": fresh_prompt(),
                        "max_tokens": 4,
                        "temperature": 0,
                        "ignore_eos": True,
                        "stream": True,
                        "stream_options": {"include_usage": True},
                    },
                ),
                (
                    "/v1/completions",
                    "completion.protocol.CompletionRequest",
                    {"model": "m", "prompt": PROMPT, "max_tokens": 8, "temperature": 0},
                ),
            ]
            if not shadowed:
                requests.append(
                    (
                        "/v1/chat/completions",
                        "chat_completion.protocol.ChatCompletionRequest",
                        {
                            "model": "m",
                            "messages": [{"role": "user", "content": PROMPT}],
                            "temperature": 0,
                            "max_completion_tokens": 32,
                            "chat_template_kwargs": {"enable_thinking": False},
                        },
                    )
                )
                documents.append(("engine.protocol.ModelList", json.loads(http_get(f"{base}/v1/models") or b"")))
            for path, request_model, body in requests[:1] if shadowed else requests:
                documents.append((request_model, body))
                request = urllib.request.Request(
                    base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(request, timeout=30) as response:
                    raw = response.read().decode()
                if body.get("stream"):
                    events = [
                        json.loads(line[5:])
                        for line in raw.splitlines()
                        if line.startswith("data:") and line[5:].strip() != "[DONE]"
                    ]
                    documents += [
                        ("engine.protocol.ErrorResponse", e)
                        if "error" in e
                        else ("completion.protocol.CompletionStreamResponse", e)
                        for e in events
                    ]
                else:
                    documents.append(
                        (
                            "completion.protocol.CompletionResponse"
                            if path == "/v1/completions"
                            else "chat_completion.protocol.ChatCompletionResponse",
                            json.loads(raw),
                        )
                    )
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert any(w == "engine.protocol.ErrorResponse" for w, _ in documents)  # the mid-stream failure
    (tmp_path / "documents.json").write_text(json.dumps([(f"{PROTOCOL}.{w}", d) for w, d in documents]))
    out = subprocess.run(
        [str(real["python"]), "-c", MODELS, str(tmp_path / "documents.json")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


#: A word-level tokenizer of 2000 words, written with the real venv's `tokenizers`: vLLM's random dataset draws
#: token ids from it (the stub server needs none; vLLM's benchmark reports TTFT, TPOT and ITL only with one).
TOKENIZER = r'''
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
out = Path(sys.argv[1])
tok = Tokenizer(models.WordLevel({"[UNK]": 0, **{f"w{i}": i + 1 for i in range(2000)}}, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                       "unk_token": "[UNK]", "model_max_length": 100000}))
'''


@pytest.mark.live
def test_the_real_vllm_bench_serve_at_the_stub_gives_our_clients_figures(
    real: Dict[str, Any], tmp_path: Path, home: Path
) -> None:
    """vLLM 0.23.0's own `vllm bench serve` (bench's real path, bench/vllm_bench.py) pointed at a stub server from
    `serve --detach`: its saved JSON, read as bench reads it, within 5% of the own client's figures at 1, 4, 16."""
    import socket

    from helpers.cli import clean_env

    from ascend_setup.bench import sweep, vllm_bench
    from ascend_setup.simulate.fake_cann import build_fake_cann

    model = build_model(tmp_path / "models" / "dense", "dense")
    subprocess.run([str(real["python"]), "-c", TOKENIZER, str(model)], check=True, timeout=300)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    workdir = tmp_path / "work"
    env = clean_env(home)
    started = subprocess.run(
        [
            sys.executable,
            "-m",
            "ascend_setup",
            "serve",
            str(model),
            "--venv",
            str(serving_venv(tmp_path / "venv")),
            "--workdir",
            str(workdir),
            "--cann-home",
            str(build_fake_cann(tmp_path / "A2").root),
            "--port",
            str(port),
            "--measure-tokens",
            "8",
            "--detach",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr
    try:
        theirs = vllm_bench.VllmBench(real["python"].parent / "vllm", "0.23.0", model, {})
        base = f"http://127.0.0.1:{port}"
        # TTFT runs from the client's start stamp, so it holds the client's own request set-up: for a burst of
        # 16, vLLM's one asyncio loop (aiohttp) has its requests at the server 12-17 ms after its stamps (32 ms
        # under a load spike), our 16 threads 1-8 ms after theirs; the stub's server side measured the same for
        # both (0.1 ms to the prefill, one step after it to the first chunk). At 64 input tokens (TTFT 145 ms)
        # that was +8-12%, at 256 (530 ms) +2.4-6%; at 512 (TTFT ~1.05 s, the stub's 2 ms a prompt token) it is
        # under 3.5%, and every figure holds to 5%
        for c in (1, 4, 16):
            ours = sweep.run_level(base, "dense", c, 16, 512, 24, False, 60)
            got = vllm_bench.run_level(theirs, base, "dense", c, 16, 512, 24, False, 60)
            assert got.requests == ours.requests == 16
            for field in ("ttft_s", "tpot_ms", "itl_ms", "e2el_s"):
                mine, real_one = getattr(ours.measurement, field), getattr(got.measurement, field)
                assert abs(real_one / mine - 1) < 0.05, (c, field, real_one, mine)
            mine, real_one = ours.measurement.ttft_s, got.measurement.ttft_s
            assert abs(got.output_tok_s / ours.output_tok_s - 1) < 0.05, (c, got.output_tok_s, ours.output_tok_s)
            print(
                f"concurrency {c}: vllm bench serve TPOT {got.measurement.tpot_ms} ms, TTFT {real_one} s, "
                f"{got.output_tok_s} tok/s; ours {ours.measurement.tpot_ms} ms, {mine} s, {ours.output_tok_s} tok/s"
            )
    finally:
        subprocess.run(
            [sys.executable, "-m", "ascend_setup", "serve", "stop", "dense", "--workdir", str(workdir)],
            capture_output=True,
            env=env,
            timeout=120,
        )
