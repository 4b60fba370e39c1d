"""Benchmark: `ascend-setup triage` of a 1 GiB log, as a user runs it (a child process: its wall time, and its peak
RSS from the rusage the kernel keeps for that child). Three logs, generated in a temporary directory:
- a build: the real COMPILE_CUSTOM_KERNELS=0 build output of tests/data/logs repeated, with the real dlog failure
  near its end (the cause buried under ~1 GiB, then pip's summaries);
- a server: vLLM's steady-state output under its process prefixes (request and throughput lines, a warning now
  and then; written here), ending in a worker's prefixed traceback and the API server's wrapper
  (tests/data/logs/qkv-rmsnorm-rope.log): the reader strips every prefix it decodes;
- both kinds of noise and no cause at all (every line must be looked at);
- the real logs of ../shared/triage-corpus* (when they are beside the repository), every line of every log repeated:
  the densest log there is (tracebacks, CANN blocks, error codes on most lines, a vLLM restart in each copy), whose
  answer is the one its last copy gives.

    .venv/bin/python benchmarks/triage.py               # 1 GiB each
    .venv/bin/python benchmarks/triage.py --mib 256

Targets: < 15 s and < 200 MB RSS for 1 GiB. On a shared host the wall time follows the load; the CPU time and the
ratio to one read+find pass (printed beside it) do not.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

from _common import REPO

from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.scan import triage_stream

LOGS = REPO / "tests" / "data" / "logs"
CORPORA = sorted(p for p in (REPO.parent / "shared").glob("triage-corpus*") if (p / "INDEX.tsv").is_file())
SERVE_NOISE = "".join(
    f"(APIServer pid=4050) INFO 12-01 09:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
    f"{512 + s}.3 tokens/s, Avg generation throughput: 58.{s % 10} tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
    f"GPU KV cache usage: 0.{s % 10}%, Prefix cache hit rate: 0.0%\n"
    f'(APIServer pid=4050) INFO:     127.0.0.1:{51000 + s} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    + (
        f"(EngineCore_DP0 pid=4121) WARNING 12-01 09:{m:02d}:{s:02d} [scheduler.py:412] Sequence group "
        f"chatcmpl-{m}{s} is preempted by PreemptionMode.RECOMPUTE because there is not enough KV cache space\n"
        if s % 20 == 0
        else ""
    )
    for m in range(60)
    for s in range(60)
).encode()


def _body(name: str) -> bytes:
    """A log of tests/data/logs without its first line (where it came from)."""
    return (LOGS / name).read_bytes().split(b"\n", 1)[1]


def _corpus_lines() -> bytes:
    """Every line of every shared corpus log, log after log."""
    logs = [log.read_bytes() for corpus in CORPORA for log in sorted(corpus.glob("*.log"))]
    return b"".join(data if data.endswith(b"\n") else data + b"\n" for data in logs)


def make_corpus_log(path: Path, size: int) -> Tuple[Optional[str], int]:
    """About `size` bytes of the corpus lines repeated; the answer is the one two copies give, in the last copy when
    it is in the second (each copy reads the same as the one before it)."""
    unit = _corpus_lines()
    copies = max(2, size // len(unit))
    with path.open("wb") as out:
        for _ in range(copies):
            out.write(unit)
    two = triage_stream(io.BytesIO(unit * 2), host=Host())
    if two is None or two.id is None:
        return None, 0
    lines = unit.count(b"\n")
    return two.id, two.line_number + (copies - 2) * lines if two.line_number > lines else two.line_number


def make_log(path: Path, size: int, kind: str) -> Tuple[Optional[str], int]:
    """Write about `size` bytes of `kind` ('build', 'serve' or 'none') to `path`; returns the cause's id and line
    number that triage must find (None, 0 for 'none')."""
    noise = {
        "build": _body("clean-compile-custom-kernels-0.log"),
        "serve": SERVE_NOISE,
        "none": _body("clean-compile-custom-kernels-0.log") + SERVE_NOISE,
    }[kind]
    cause, failure, marker = {
        "build": ("dlog-missing", _body("dlog-missing.log"), b"Could NOT find dlog"),
        "serve": (
            "qkv-rmsnorm-rope",
            _body("qkv-rmsnorm-rope.log").split(b"\n", 11)[11],
            b"AttributeError: '_OpNamespace'",
        ),
        "none": (None, b"", b""),
    }[kind]
    with path.open("wb") as out:
        written, lines = 0, 0
        while written < size - len(failure) - len(noise):
            out.write(noise)
            written += len(noise)
            lines += noise.count(b"\n")
        out.write(failure or noise)
    if cause is None:
        return None, 0
    return cause, lines + failure.partition(marker)[0].count(b"\n") + 1


def triage_child(log: Path) -> Tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + system: what a loaded host does not inflate), peak RSS in MB, and the
    output of `ascend-setup triage --json LOG`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ascend_setup", "triage", "--json", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (Popen has not reaped it)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.decode()


def one_pass(log: Path) -> float:
    """Seconds to read `log` and run one bytes.find over it: this machine's floor (triage makes one find per
    marker), so a figure measured under load can be compared with one measured on an idle host."""
    start = time.perf_counter()
    with log.open("rb") as stream:
        for block in iter(lambda: stream.read(8 << 20), b""):
            block.find(b"\x01")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="log size in MiB (default 1024)")
    args = parser.parse_args()
    size = args.mib << 20
    with tempfile.TemporaryDirectory(prefix="bench-triage-") as tmp:
        kinds: List[str] = ["build", "serve", "none", *(["corpus"] if CORPORA else [])]
        for kind in kinds:
            log = Path(tmp) / f"{kind}.log"
            cause, expected = make_corpus_log(log, size) if kind == "corpus" else make_log(log, size, kind)
            floor = one_pass(log)
            wall, cpu, rss, out = triage_child(log)
            data = json.loads(out)
            found = f"{data['id']} at line {data['line_number']}" if data["id"] else "no cause"
            ok = (data["id"], data["line_number"]) == (cause, expected) if cause else data["id"] is None
            print(
                f"{log.name}: {log.stat().st_size / 2**20:.0f} MiB, {found} ({'right' if ok else 'WRONG'}): "
                f"{wall:.1f} s ({cpu:.1f} s CPU), peak RSS {rss:.0f} MB "
                f"({log.stat().st_size / 2**20 / wall:.0f} MiB/s); "
                f"targets < 15 s, < 200 MB; one read+find pass here takes {floor:.1f} s ({wall / floor:.1f}x); "
                f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
                flush=True,
            )
            log.unlink()


if __name__ == "__main__":
    main()
