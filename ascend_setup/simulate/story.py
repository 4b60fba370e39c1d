"""The demo's story: the real install pipeline against a simulated Ascend host, stopped with SIGKILL
partway (mid-download of the vllm-ascend sdist by default), resumed, audited and summed up.

Real pip or uv, a real venv, the real steps, state and lock: only the host is simulated. The install's
child processes get a HOME and caches inside the demo's workdir, so nothing outside it is touched.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Union

from ascend_setup.errors import AscendSetupError, StepFailed
from ascend_setup.host.cann import primary_cann
from ascend_setup.host.machine import free_disk_bytes
from ascend_setup.host.setenv import capture_env
from ascend_setup.matrix.load import PACKAGED_MATRIX, parse_matrix
from ascend_setup.matrix.serve_hints import hint_lines
from ascend_setup.simulate.ecosystem import TORCH_PYTHONS
from ascend_setup.simulate.index_server import Behaviour
from ascend_setup.simulate.model_dirs import build_model
from ascend_setup.simulate.native_stubs import compiler
from ascend_setup.simulate.world import start_simulated_host, venv_python_for
from ascend_setup.steps.pipeline import build_pipeline
from ascend_setup.utils.files import open_append
from ascend_setup.utils.interrupts import descendants
from ascend_setup.utils.procs import send

CANN = "9.1.0"
DOWNLOAD = "download"  # --interrupt-at's default: the middle of the vllm-ascend sdist download
NOWHERE = "none"
LABEL = "[simulated]"
#: The main index sends files this fast, so that the sdist's download takes a couple of seconds.
THROTTLE = 1_500_000
MB = 1024 * 1024
#: What the demo puts on disk, measured with `du -sm` of a kept workdir (46 MB with pip: the simulated host,
#: the venv, the caches, the logs), plus a margin for pip's temporary build trees: a 1 GiB /tmp is plenty.
DISK_NEED = 200 * MB
#: Steps over too soon (the mirror step only records `--mirror none`; verify is a second of imports) for a SIGKILL
#: to land inside them reliably.
QUICK = ("mirror", "verify")
#: The demo's bench sweep: three levels, a few seconds in all.
BENCH_LEVELS = "1,4,16"
Stream = Union[None, int, IO[Any]]


def interrupt_points() -> List[str]:
    return [DOWNLOAD, NOWHERE, *(s.name for s in build_pipeline() if s.name not in QUICK)]


def simulated_matrix(root: Path) -> Path:
    """The packaged matrix, with the simulated stack's disk need in place of the real row's 40 GiB (its stub
    packages take megabytes), so the install's own preflight checks what this install needs."""
    text = re.sub(r"(?m)^(\s+disk_gib:) .*$", rf"\g<1> {DISK_NEED / (1024 * MB):.2f}", PACKAGED_MATRIX.read_text())
    root.mkdir(parents=True, exist_ok=True)
    path = root / "compat_matrix.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def check_disk(workdir: Path) -> None:
    free = free_disk_bytes(workdir)
    if free < DISK_NEED:
        raise StepFailed(
            f"{free / MB:.0f} MB free at {workdir}; the demo needs {DISK_NEED / MB:.0f} MB",
            hint="free space there, or pass --workdir DIR on a disk with room",
        )


def child_env(workdir: Path) -> Dict[str, str]:
    """The install's environment: HOME and caches inside the demo's workdir, a build that shows its stages."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "ASCEND_SETUP_"))}
    env.update(
        {
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "PIP_CONFIG_FILE": os.devnull,
            "STUB_BUILD_STAGES": "8",
            "STUB_STAGE_SECONDS": "0.3",
        }
    )
    return env


def _reached(point: str, install: Path) -> bool:
    if point == DOWNLOAD:
        parts = list((install / "src").glob("*.tar.gz.part")) if (install / "src").is_dir() else []
        return any(p.stat().st_size > 256 * 1024 for p in parts)
    try:
        steps = json.loads((install / "state.json").read_text())["steps"]
    except (OSError, ValueError, KeyError):
        return False
    state: object = steps.get(point, {}).get("state")
    return state == "started"


def _stopped_at(install: Path) -> Dict[str, Any]:
    """What the SIGKILL left behind: the step that was running and, mid-download, the bytes kept."""
    steps = json.loads((install / "state.json").read_text())["steps"]
    parts = list((install / "src").glob("*.part")) if (install / "src").is_dir() else []
    return {
        "step": next((n for n, r in steps.items() if r["state"] == "started"), None),
        "kept_bytes": parts[0].stat().st_size if parts else 0,
    }


def _cli(*args: str, env: Dict[str, str]) -> Dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "ascend_setup", *args], env=env, capture_output=True, text=True)
    document: Dict[str, Any] = json.loads(done.stdout)  # the command's --json document
    return document


def _shell(install: Path) -> List[str]:
    """The lines the install's verify step recorded for a person's shell (CANN's set_env.sh, the venv)."""
    steps = json.loads((install / "state.json").read_text())["steps"]
    return list(steps.get("verify", {}).get("outputs", {}).get("shell", []))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_ending(workdir: Path, cann_root: Path, env: Dict[str, str], show: Callable[[str], None]) -> Dict[str, Any]:
    """The demo's ending: `serve` on a tiny simulated model in the installed venv (ready, the smoke answer, TTFT
    and tok/s), a short `bench` sweep at three concurrencies, then `serve stop`. The model has an 8B's config
    and 16 GB of weights as a sparse file (a few kB on disk), so the stub streams at the rate a 910B3 would give
    it."""
    started = time.monotonic()
    model = build_model(workdir / "models" / "tiny-qwen3", "dense", weight_bytes=16 * 10**9)
    install = workdir / "install"
    argv = [
        "serve",
        str(model),
        "--workdir",
        str(install),
        "--venv",
        str(install / "venv"),
        "--cann-home",
        str(cann_root),
        "--port",
        str(_free_port()),
        "--detach",
        "--measure-tokens",
        "64",
    ]
    show(f"{LABEL} $ ascend-setup {' '.join(argv)}")
    done = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *argv, "--json"], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise StepFailed(
            f"the simulated serve failed (exit {done.returncode}): "
            f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}",
            hint=f"its log is {install / 'serve' / 'tiny-qwen3.log'}",
        )
    result = json.loads(done.stdout)
    swept = bench_sweep(install, env, show)
    show(f"{LABEL} $ ascend-setup serve stop tiny-qwen3 --workdir {install}")
    stopped = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "serve", "stop", "tiny-qwen3", "--workdir", str(install)],
        env=env,
        capture_output=True,
        text=True,
    )
    if stopped.returncode != 0:
        raise StepFailed(f"serve stop failed: {stopped.stderr.strip()}")
    if isinstance(swept, str):
        raise StepFailed(f"the simulated bench failed: {swept}")
    return {
        "model": result["name"],
        "ready_seconds": result["ready_seconds"],
        "answer": result["answer"],
        "ttft_s": result["ttft_s"],
        "tpot_ms": result["tpot_ms"],
        "tpot_p90_ms": result["tpot_p90_ms"],
        "tok_s": result["tok_s"],
        "predicted_tok_s": result["predicted_tok_s"],
        "ratio": result["ratio"],
        "bench": swept,
        "stopped": True,
        "seconds": round(time.monotonic() - started, 1),
    }


def bench_sweep(install: Path, env: Dict[str, str], show: Callable[[str], None]) -> Union[Dict[str, Any], str]:
    """The serve part's last word: a short `bench` sweep at BENCH_LEVELS against the detached server (a few
    requests a level, short outputs: seconds), its figures per level and its wall time; or why it failed (the
    server is stopped either way)."""
    argv = [
        "bench",
        "tiny-qwen3",
        "--workdir",
        str(install),
        "--concurrency",
        BENCH_LEVELS,
        "--requests",
        "4",
        "--input-len",
        "64",
        "--output-len",
        "16",
    ]
    show(f"{LABEL} $ ascend-setup {' '.join(argv)}")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *argv, "--json"], env=env, capture_output=True, text=True
    )
    seconds = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        return f"exit {done.returncode}: {(done.stderr.strip().splitlines() or ['no output'])[-1]}"
    result = json.loads(done.stdout)
    return {
        "client": result["client"],
        "seconds": seconds,
        "reasons": [r["rule"] for r in result["reasons"]],
        "levels": [
            {k: level[k] for k in ("concurrency", "requests", "output_tok_s", "tpot_ms", "ttft_s")}
            for level in result["levels"]
        ],
    }


def native_note() -> str:
    """Whether the simulated world's libraries are real ELF with native needs (they need a C compiler)."""
    if compiler():
        return "vllm_ascend_C is a real shared object that needs NNAL's libatb.so: checked by verify and audit"
    return "no C compiler here: the simulated libraries need nothing, so the native check had nothing to find"


def run_demo(
    workdir: Path,
    *,
    interrupt_at: str = DOWNLOAD,
    installer: str = "uv",
    show: Callable[[str], None] = lambda line: None,
    stream: Stream = None,
    kept: bool = True,
) -> Dict[str, Any]:
    """The whole story; returns its summary. Raises StepFailed when a part of it does not hold. `kept`: the
    workdir outlives the demo (else a failure's hint cannot point at its logs)."""
    started = time.monotonic()
    check_disk(workdir)
    matrix = simulated_matrix(workdir / "host")
    row = parse_matrix(matrix.read_text(), str(matrix)).rows[CANN]
    try:
        python = venv_python_for(row)
    except AscendSetupError as exc:
        raise StepFailed(
            f"the demo needs a Python in the row's range {row.python}: {exc.message}", hint=exc.hint
        ) from None
    show(
        f"{LABEL} a simulated Atlas A2 host in {workdir / 'host'}: loopback indexes (main, Ascend, PyTorch CPU) "
        f"with stub packages, a fake CANN {CANN} with driver, npu-smi and NNAL"
    )
    install = workdir / "install"
    env = child_env(workdir)
    with start_simulated_host(
        workdir / "host",
        row,
        plugin_wheel_arches=(),
        triton_pythons=TORCH_PYTHONS,
        behaviour=Behaviour(bytes_per_second=THROTTLE),
        native_needs=True,
    ) as host:
        argv = [
            "install",
            "--cann",
            CANN,
            "--cann-home",
            str(host.cann.root),
            *host.index_args(),
            "--mirror",
            "none",
            "--matrix",
            str(matrix),
            "--yes",
            "--workdir",
            str(install),
            "--python",
            python,
            "--installer",
            installer,
        ]
        show(f"{LABEL} $ ascend-setup {' '.join(argv)}")
        # The install's closing lines (ready, shell, hints) go to a file: the demo ends with its own, once.
        out = open_append(workdir / "install-stdout.log")
        proc = subprocess.Popen([sys.executable, "-m", "ascend_setup", *argv], env=env, stdout=out, stderr=stream)
        stopped: Dict[str, Any] = {}
        if interrupt_at != NOWHERE:
            while proc.poll() is None and not _reached(interrupt_at, install):
                time.sleep(0.05)
            if proc.poll() is None:
                for pid in [*descendants(proc.pid), proc.pid]:  # the whole tree, as an instance stop does
                    send(pid, signal.SIGKILL)
                proc.wait()
                stopped = _stopped_at(install)
                sdist = f", {stopped['kept_bytes'] / 1e6:.1f} MB of the sdist kept" if stopped["kept_bytes"] else ""
                show(f"{LABEL} SIGKILL ({interrupt_at}): step {stopped['step']} was running{sdist}")
                show(f"{LABEL} $ ascend-setup resume --workdir {install}")
                host.main.requests.clear()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "ascend_setup", "resume", "--workdir", str(install)],
                    env=env,
                    stdout=out,
                    stderr=stream,
                )
            else:
                show(f"{LABEL} the install ended before {interrupt_at}: nothing was interrupted")
        code = proc.wait()
        out.close()
        if code != 0:
            raise StepFailed(
                f"the simulated install failed (exit {code})",
                hint=f"its logs are in {install / 'logs'}"
                if kept
                else "run 'ascend-setup demo --keep' to keep its workdir and logs",
            )
        ranges = [h.get("Range") for path, h in host.main.requests if path.endswith(".tar.gz") and h.get("Range")]
        status = _cli("status", "--workdir", str(install), "--json", env=env)
        # audited as a person's shell has it after the install's closing lines: CANN's and NNAL's set_env.sh
        # sourced (vllm_ascend_C needs NNAL's libatb.so, which only that environment resolves)
        cann = primary_cann(str(host.cann.root))
        scripts = cann.set_env_scripts() if cann else []
        audit = _cli(
            "audit",
            "--venv",
            str(install / "venv"),
            "--json",
            env=capture_env(scripts, base=env).apply(env) if scripts else env,
        )
        served = serve_ending(workdir, host.cann.root, env, show)
    if stopped:
        stopped["continued_with"] = ranges[0] if ranges else None
    return {
        "simulated": True,
        "workdir": str(workdir),
        "installer": installer,
        "python": python,
        "interrupted_at": interrupt_at if stopped else None,
        "resumed": stopped or None,
        "steps": status["steps"],
        "audit": {
            "ok": audit["ok"],
            "errors": sum(f["severity"] == "error" for f in audit["findings"]),
            "findings": len(audit["findings"]),
            "summary": audit["summary"],
        },
        "shell": _shell(install),
        "hints": hint_lines(row),
        "serve": served,
        "native": native_note(),
        "seconds": round(time.monotonic() - started, 1),
    }
