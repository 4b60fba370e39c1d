"""The stub vllm's serving side: `vllm serve MODEL` runs a real HTTP server speaking the OpenAI API (`/health`,
`/v1/models`, chat and completions, streaming with `usage`), as the simulated host's vLLM.

What it does as the real 0.23.0 does on an NPU, where it matters to `ascend-setup serve`:
- logs its start-up phases with the multiproc prefixes (`(APIServer pid=N)`, `(EngineCore_DP0 pid=N)`), and
  its engine core is a second process, which stops with the API server;
- listens only once the engine is up; streams at the rate the simulated card's bandwidth and the model's bytes
  give (`VLLM_SIM_HBM_GBPS`, default 1490, the 910B3's; x 0.65, the field report's factor);
- reads its arguments with vLLM 0.23.0's parser rules over the real flags (an unknown flag exits 2 with the
  real message), and ignores unknown `--additional-config` keys without a word;
- binds every interface unless `--host` is given; serves `/version` and `/metrics` (vLLM's metric names);
  caches prompt prefixes in 128-token blocks (on unless `--no-enable-prefix-caching`), so a repeated prompt's
  TTFT is a cache hit; logs "Capturing CUDA graphs" as the real one does;
- fails a streamed request mid-stream as vLLM does: HTTP 200, an error event, then `[DONE]`;
- with upstream triton shadowing triton-ascend (HAS_TRITON false), logs `Triton is installed but 0 active
  driver(s) found` at start-up and crashes on the first request with `'function' object is not subscriptable`.
`VLLM_SIM_FAIL=early` makes it die while loading weights (libatb.so missing), `VLLM_SIM_FAIL=hang` stops it
at graph capture forever; `VLLM_SIM_PHASE_SECONDS` sets each phase's length (default 0.3 s).
"""

from pathlib import Path
from typing import Dict

from ascend_setup.serve import vllm_args
from ascend_setup.serve.flag_table import TABLE

TRITON_UTILS = '''\
"""stub vllm.triton_utils: Triton counts only when its jit gives an indexable kernel (triton-ascend's does;
upstream triton without an NPU driver hands back the plain function)."""
try:
    import triton
    HAS_TRITON = hasattr(triton.jit(lambda: None), "__getitem__")
except ImportError:
    HAS_TRITON = False
'''

CLI_MAIN = '''\
"""stub `vllm` command: `vllm serve MODEL [options]` starts the simulated OpenAI-compatible server."""
import sys


def main():
    if sys.argv[1:2] != ["serve"] or len(sys.argv) < 3:
        print("usage: vllm serve MODEL [options]", file=sys.stderr)
        raise SystemExit(2)
    from vllm.entrypoints.openai.api_server import run
    run(sys.argv[2:])
'''

SCRIPT = "#!python\nfrom vllm.entrypoints.cli.main import main\nmain()\n"

SERVER = r'''
"""stub vllm.entrypoints.openai.api_server (see ascend_setup/simulate/stub_vllm.py)."""
import argparse, ctypes, json, os, signal, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

API = "(APIServer pid=%d)" % os.getpid()
ENGINE_LOOP = "import time\nwhile True:\n    time.sleep(3600)\n"
EFFICIENCY = 0.65
#: The batch model (fit/batch.py's): a step reads the weights once (1 / rate, the rate from the weights' bytes)
#: and the KV of every running sequence at its context (KV bytes per token from config.json, at the same share of
#: the bandwidth), so throughput grows with concurrency and each user's speed falls as the contexts add up.
#: Eager mode (--enforce-eager) is 5.7x slower (the field report).
EAGER_SLOWDOWN = 5.7
batch = {"active": 0, "tokens": 0, "context": 0, "lock": threading.Lock()}
state = {"requests": 0, "engine": None, "rate": 1.0, "name": "", "names": [], "max_model_len": 0, "triton": True,
         "prefix_caching": True, "blocks": set(), "metrics": {}, "kv_s_per_token": 0.0}
BLOCK = 128  # Ascend's KV block, in tokens (a word is a token here)
PREFILL_SECONDS_PER_TOKEN = 0.002


def cached_tokens(words):
    """Leading whole blocks whose chain of hashes was seen (vLLM's prefix cache); the blocks are then kept."""
    cached, chain = 0, ()
    for start in range(0, len(words) - len(words) % BLOCK, BLOCK):
        chain = hash((chain, tuple(words[start:start + BLOCK])))
        if state["prefix_caching"] and chain in state["blocks"] and cached == start:
            cached = start + BLOCK
        state["blocks"].add(chain)
    return min(cached, max(0, len(words) - 1))  # the last token is always computed


def kv_budget():
    """Tokens the simulated KV cache holds (VLLM_SIM_KV_TOKENS; default: plenty)."""
    return int(os.environ.get("VLLM_SIM_KV_TOKENS", "10000000"))


def step_seconds():
    """One decode step at the current batch: the weights once, the KV of every running sequence's context."""
    return 1.0 / state["rate"] + state["kv_s_per_token"] * batch["context"]


def kv_bytes_per_token(model_dir, tp):
    """K and V of every layer in bf16 (config.json's layers, KV heads and head size), per card under TP."""
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return 0
    cfg = cfg.get("text_config") or cfg
    heads = int(cfg.get("num_attention_heads") or 1)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or int(cfg.get("hidden_size") or 0) // heads)
    return 2 * int(cfg.get("num_hidden_layers") or 0) * kv_heads * head_dim * 2 / min(tp, kv_heads)


def join_batch(tokens, context):
    """A sequence joins the running batch; past the KV budget, vLLM preempts one (counted as it counts them)."""
    with batch["lock"]:
        batch["active"] += 1
        batch["tokens"] += tokens
        batch["context"] += context
        if batch["tokens"] > kv_budget():
            count("vllm:num_preemptions_total")


def grow_batch():
    """A running sequence decoded a token: its context, read every step, is one longer."""
    with batch["lock"]:
        batch["context"] += 1


def leave_batch(tokens, context):
    with batch["lock"]:
        batch["active"] -= 1
        batch["tokens"] -= tokens
        batch["context"] -= context


def count(name, value=1.0):
    state["metrics"][name] = state["metrics"].get(name, 0.0) + value


METRICS = (("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine."),
           ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed."),
           ("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried "
            "tokens."),
           ("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens."),
           ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed."),
           ("vllm:request_success_total", "counter", "Count of successfully processed requests."),
           ("vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds."),
           ("vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds."),
           ("vllm:e2e_request_latency_seconds", "histogram", "Histogram of e2e request latency in seconds."))


def metrics_text():
    labels = '{engine="0",model_name="%s"}' % state["name"]
    lines = []
    for name, kind, text in METRICS:
        lines += ["# HELP %s %s" % (name, text), "# TYPE %s %s" % (name, kind)]
        if kind == "counter":
            lines.append("%s%s %s" % (name, labels, float(state["metrics"].get(name, 0.0))))
        else:
            n, total = state["metrics"].get(name + "_count", 0.0), state["metrics"].get(name + "_sum", 0.0)
            lines += ['%s_bucket{engine="0",le="+Inf",model_name="%s"} %s' % (name, state["name"], float(n)),
                      "%s_count%s %s" % (name, labels, float(n)), "%s_sum%s %s" % (name, labels, float(total))]
    return "\n".join(lines) + "\n"


def observe(name, seconds):
    count(name + "_count")
    count(name + "_sum", seconds)


def log(prefix, level, where, text):
    stamp = time.strftime("%m-%d %H:%M:%S")
    print("%s %s %s [%s] %s" % (prefix, level, stamp, where, text), flush=True)


def engine_prefix():
    return "(EngineCore_DP0 pid=%d)" % state["engine"].pid


def die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)


def stop(signum=None, frame=None, code=0):
    if threading.current_thread() is threading.main_thread():  # (a crash on a request stops from its thread)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second signal must not re-enter the shutdown
    log(API, "INFO", "launcher.py:110", "Shutting down FastAPI HTTP server.")
    engine = state["engine"]
    if engine is not None and engine.poll() is None:
        engine.kill()
        engine.wait()
    os._exit(code)


def parse(argv):
    """vLLM 0.23.0's parser: its flags (_serve_flags.json) under FlexibleArgumentParser's rules (_flexible_args.py,
    ascend-setup's own reading of them); what it refuses exits 2 with the real message."""
    from vllm._flexible_args import ServeArgsError, parse_serve
    flags = json.loads((Path(__file__).resolve().parents[2] / "_serve_flags.json").read_text())["flags"]
    try:
        return parse_serve(flags, argv)
    except ServeArgsError as exc:
        print("usage: vllm serve [model_tag] [options]", file=sys.stderr)
        print(exc, file=sys.stderr)
        raise SystemExit(2)


def start_up(args):
    pause = float(os.environ.get("VLLM_SIM_PHASE_SECONDS", "0.3"))
    fail = os.environ.get("VLLM_SIM_FAIL", "")
    log(API, "INFO", "utils.py:253", "non-default args: %s" % {"model_tag": args.model_tag, "port": args.port})
    # additional_config: parsed, and every key it does not know ignored, as 0.23 does
    from vllm.triton_utils import HAS_TRITON
    state["triton"] = HAS_TRITON
    if not HAS_TRITON:
        log(API, "WARNING", "__init__.py:40", "Triton is installed but 0 active driver(s) found (expected 1). "
            "Disabling Triton to prevent runtime errors.")
    state["engine"] = subprocess.Popen([sys.executable, "-c", ENGINE_LOOP], preexec_fn=die_with_parent)
    eng = engine_prefix()
    log(eng, "INFO", "core.py:93", "Initializing a V1 LLM engine (v0.23.0) with config: model=%r, "
        "speculative_config=%s, tensor_parallel_size=%d, enforce_eager=%s, enable_prefix_caching=%s"
        % (args.model_tag, args.speculative_config, args.tensor_parallel_size, bool(args.enforce_eager),
           state["prefix_caching"]))
    log(eng, "INFO", "model_runner.py:2711", "Starting to load model %s..." % args.model_tag)
    time.sleep(pause)
    if fail == "early":
        log(eng, "ERROR", "core.py:708", "EngineCore failed to start.")
        print("%s Traceback (most recent call last):" % eng)
        print('%s   File "vllm_ascend/worker/worker.py", line 120, in load_model' % eng)
        print("%s OSError: libatb.so: cannot open shared object file: No such file or directory" % eng, flush=True)
        log(API, "ERROR", "api_server.py:900", "RuntimeError: Engine core initialization failed. See root cause "
            "above. Failed core proc(s): {}")
        state["engine"].kill()
        raise SystemExit(1)
    weights = sum(p.stat().st_size for p in Path(args.model_tag).glob("*.safetensors"))
    gb = weights / 1e9 / args.tensor_parallel_size
    gbps = float(os.environ.get("VLLM_SIM_HBM_GBPS", "1490"))
    state["rate"] = (gbps * EFFICIENCY / gb if gb else 1000.0) / (EAGER_SLOWDOWN if args.enforce_eager else 1.0)
    kv = kv_bytes_per_token(args.model_tag, args.tensor_parallel_size)
    state["kv_s_per_token"] = kv / (gbps * 1e9 * EFFICIENCY)
    log(eng, "INFO", "default_loader.py:262", "Loading weights took %.2f seconds" % pause)
    log(eng, "INFO", "model_runner.py:2740", "Model loading took %.2f GiB and %.2f seconds" % (gb * 0.93, pause))
    if not args.enforce_eager:
        log(eng, "INFO", "backends.py:548", "Dynamo bytecode transform time: %.2f s" % pause)
        time.sleep(pause)
        log(eng, "INFO", "monitor.py:34", "torch.compile takes %.2f s in total" % pause)
        log(eng, "INFO", "gpu_model_runner.py:4587", "Capturing CUDA graphs (decode, FULL): 100%|##########| "
            "35/35 [00:02<00:00, 15.2it/s]")
        if fail == "hang":  # what vLLM prints while its engine is stuck
            while True:
                log(API, "WARNING", "shm_broadcast.py:466", "No available shared memory broadcast block found in 60 "
                    "seconds. This typically happens when some processes are hanging or doing some time-consuming "
                    "work (e.g. compilation, weight/kv cache quantization).")
                time.sleep(1.0)
        time.sleep(pause)
        log(eng, "INFO", "model_runner.py:3520", "Graph capturing finished in %.0f secs" % pause)
    log(eng, "INFO", "core.py:210",
        "init engine (profile, create kv cache, warmup model) took %.2f seconds" % (3 * pause))
    log(eng, "INFO", "core.py:215", "[simulated] decode rate %.2f tok/s (%g GB/s x %s / %.2f GB per token)"
        % (state["rate"], gbps, EFFICIENCY, gb))
    log(eng, "INFO", "core.py:216", "[simulated] batch step +%.9f ms per context token of every running sequence "
        "(%d bytes of KV per token), KV budget %d tokens" % (state["kv_s_per_token"] * 1000, kv, kv_budget()))


def crash_on_triton():
    """The first request runs a Triton kernel; with upstream triton's plain function it cannot be indexed."""
    eng = engine_prefix()
    log(eng, "ERROR", "core.py:933", "EngineCore encountered a fatal error.")
    lines = ["Traceback (most recent call last):",
             '  File "vllm_ascend/worker/block_table.py", line 160, in compute_slot_mapping',
             "    _compute_slot_mapping_kernel[grid](",
             "TypeError: 'function' object is not subscriptable"]
    for line in lines:
        print("%s %s" % (eng, line), flush=True)
    log(API, "ERROR", "async_llm.py:480", "AsyncLLM output_handler failed. EngineDeadError: EngineCore encountered "
        "an issue. See stack trace (above) for the root cause.")
    threading.Timer(0.3, stop, kwargs={"code": 1}).start()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        log(API, "INFO", "api_server.py:1300",
            '127.0.0.1 - "%s" %s' % (self.requestline, args[1] if len(args) > 1 else ""))

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, {})
        if self.path == "/version":
            return self.reply(200, {"version": "0.23.0"})
        if self.path == "/metrics":
            data = metrics_text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return self.wfile.write(data)
        if self.path == "/v1/models":
            return self.reply(200, {"object": "list", "data": [{"id": name, "object": "model",
                                                               "owned_by": "vllm (simulated)",
                                                               "max_model_len": state["max_model_len"]}
                                                              for name in state["names"]]})
        self.reply(404, {"error": {"message": "Not Found"}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if body.get("model") not in state["names"]:
            return self.reply(404, {"error": {"message": "The model `%s` does not exist." % body.get("model")}})
        state["requests"] += 1
        if not state["triton"]:
            crash_on_triton()
            error = {"object": "error", "message": "EngineCore encountered an issue. See stack trace (above) for "
                     "the root cause.", "type": "InternalServerError", "param": None, "code": 500}
            if body.get("stream"):  # the real server has sent its 200 already: an error event, then [DONE]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b"data: " + json.dumps({"error": error}).encode() + b"\n\ndata: [DONE]\n\n")
                return self.wfile.flush()
            return self.reply(500, {"error": error})
        if self.path == "/v1/chat/completions":
            return self.chat(body)
        if self.path == "/v1/completions":
            return self.complete(body)
        self.reply(404, {"error": {"message": "Not Found"}})

    def chat(self, body):
        thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking", True)
        message = {"role": "assistant", "content": "Paris.", "reasoning": None}
        if thinking:
            message = {"role": "assistant", "content": "", "reasoning": "The user asks for the capital of France."}
        self.reply(200, {"id": "chatcmpl-sim", "object": "chat.completion", "model": state["name"],
                         "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}})

    def complete(self, body):
        n = int(body.get("max_tokens") or 16)
        n = n if body.get("ignore_eos") else min(n, 12)
        words = str(body.get("prompt", "")).split()
        prompt_tokens = len(words)
        cached = cached_tokens(words)
        prefill = PREFILL_SECONDS_PER_TOKEN * (prompt_tokens - cached)
        count("vllm:prefix_cache_queries_total", prompt_tokens)
        count("vllm:prefix_cache_hits_total", cached)
        gap = 1.0 / state["rate"]
        sent = time.perf_counter()
        count("vllm:prompt_tokens_total", prompt_tokens)
        count("vllm:generation_tokens_total", n)
        count("vllm:request_success_total")
        observe("vllm:time_to_first_token_seconds", prefill + gap)
        observe("vllm:e2e_request_latency_seconds", prefill + n * gap)
        for _ in range(n - 1):
            observe("vllm:inter_token_latency_seconds", gap)
        if not body.get("stream"):
            time.sleep(n * gap)
            return self.reply(200, {"id": "cmpl-sim", "object": "text_completion", "model": state["name"],
                                    "choices": [{"index": 0, "text": " wave" * n, "finish_reason": "length"}],
                                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                              "total_tokens": prompt_tokens + n}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        join_batch(prompt_tokens + n, prompt_tokens)
        decoded = [0]
        try:
            self.stream_tokens(n, sent + prefill, body, prompt_tokens, decoded)
        finally:
            leave_batch(prompt_tokens + n, prompt_tokens + decoded[0])

    def stream_tokens(self, n, start, body, prompt_tokens, decoded):
        """n chunks, each one step of the batch as it is when the step starts, after prefill ends at `start`."""
        due = start + step_seconds()
        for i in range(n):
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            grow_batch()
            decoded[0] += 1
            due += step_seconds()
            chunk = {"id": "cmpl-sim", "object": "text_completion", "model": state["name"],
                     "choices": [{"index": 0, "text": " wave", "finish_reason": "length" if i == n - 1 else None}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"id": "cmpl-sim", "object": "text_completion", "model": state["name"], "choices": [],
                     "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                               "total_tokens": prompt_tokens + n}}
            self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def run(argv):
    args = parse(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    state["names"] = args.served_model_name or [args.model_tag]
    state["name"] = state["names"][0]
    state["max_model_len"] = args.max_model_len or 40960
    state["prefix_caching"] = args.enable_prefix_caching is not False  # on by default, as in vLLM
    start_up(args)
    host = args.host or "0.0.0.0"  # vLLM's default: every interface
    # uvicorn's listen backlog (2048), not socketserver's 5: a burst of 16 connections (bench at concurrency 16)
    # overflowed 5 and the client got ECONNRESET
    ThreadingHTTPServer.request_queue_size = 2048
    server = ThreadingHTTPServer((host, args.port), Handler)
    server.daemon_threads = True
    log(API, "INFO", "api_server.py:1820", "Starting vLLM API server 0 on http://%s:%d" % (host, args.port))
    log(API, "INFO", "launcher.py:37",
        "Available routes are: /health, /version, /metrics, /v1/models, /v1/chat/completions, /v1/completions")
    log(API, "INFO", "on.py:62", "Application startup complete.")
    server.serve_forever()
'''

#: The stub vllm wheel's files: the package, the serving side, its parser and the `vllm` console script.
FILES = {
    "vllm/_flexible_args.py": (Path(vllm_args.__file__)).read_text(encoding="utf-8"),
    "vllm/_serve_flags.json": TABLE.read_text(encoding="utf-8"),
    "vllm/triton_utils/__init__.py": TRITON_UTILS,
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/main.py": CLI_MAIN,
    "vllm/entrypoints/openai/__init__.py": "",
    "vllm/entrypoints/openai/api_server.py": SERVER,
}


def vllm_files(version: str) -> Dict[str, str]:
    return {"vllm/__init__.py": f"__version__ = {version!r}\n", **FILES, f"vllm-{version}.data/scripts/vllm": SCRIPT}
