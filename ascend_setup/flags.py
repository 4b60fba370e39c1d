"""Each option that several commands take, defined once (pip's `cmdoptions` style: a factory per option).

A command passes only what differs: its help sentence, and whether the value is required. A path flag's
ASCEND_SETUP_* variable is named from its `paths.Flag`, the one place that reads it (flag first, then the
variable, `~` expanded); `env=False` where the command reads no variable, so the help promises none.
"""

from __future__ import annotations

import argparse
from typing import Any, Optional

from ascend_setup.paths import CANN_HOME, PYTHON, VENV, WORKDIR, Flag

Parser = argparse.ArgumentParser


def _path(p: Parser, flag: Flag, help: str, *, env: bool = True, metavar: str = "DIR", **kw: Any) -> None:
    if env:  # inside the help's own closing parenthesis when it has one
        help = f"{help[:-1]}; env {flag.env})" if help.endswith(")") else f"{help} (env {flag.env})"
    p.add_argument(flag.name, metavar=metavar, help=help, **kw)


def workdir(p: Parser, help: str, *, env: bool = True) -> None:
    """`env=False`: a command that must not pick up the variable (the demo never runs in a real workdir)."""
    _path(p, WORKDIR, help, env=env)


def venv(p: Parser, help: str, *, env: bool = True, required: bool = False) -> None:
    _path(p, VENV, help, env=env, required=required)


def python(p: Parser, help: str, *, metavar: str = "EXE") -> None:
    _path(p, PYTHON, help, metavar=metavar)


def cann_home(p: Parser, help: str) -> None:
    _path(p, CANN_HOME, help)


def cann(p: Parser, help: str = "CANN version: selects a whole matrix row", *, required: bool = False) -> None:
    """The row. Where it is optional it defaults to the installed CANN's row, else the newest (host.cann.row_for);
    audit infers it from the venv instead."""
    p.add_argument("--cann", required=required, help=help)


def target(p: Parser) -> None:
    """The architecture and glibc of a machine other than this one (`plan`, `bundle`)."""
    p.add_argument("--glibc", help="target glibc, e.g. 2.31 (default: this machine's)")
    p.add_argument("--arch", help="target architecture, e.g. aarch64 (default: this machine's)")


def index_url(p: Parser, help: str = "primary package index (default: pip's configuration)") -> None:
    p.add_argument("--index-url", metavar="URL", help=help)


def extra_index_url(p: Parser, help: str) -> None:
    p.add_argument("--extra-index-url", metavar="URL", action="append", help=help)


def index(p: Parser, help: str = "replace a named index (ascend, pytorch-cpu)") -> None:
    p.add_argument("--index", metavar="NAME=URL", action="append", help=help)


def vllm_ascend(p: Parser, help: str = "for a CANN without a row: derive the row from this vllm-ascend release's "
                "metadata on the index", *, required: bool = False) -> None:
    p.add_argument("--vllm-ascend", metavar="VERSION", required=required, help=help)


def soc(p: Parser, help: str, *, metavar: str = "SOC_VERSION", default: Optional[str] = None) -> None:
    p.add_argument("--soc", metavar=metavar, default=default, help=help)


def lock(p: Parser, help: str) -> None:
    p.add_argument("--lock", metavar="FILE", help=help)


def build_deps_url(p: Parser) -> None:
    p.add_argument("--build-deps-url", metavar="URL", help="fetch the source build's third-party archives (json, "
                   "abseil-cpp, protobuf, makeself) from URL/<file name> instead of the URLs its CMake files name")


def installer(p: Parser) -> None:
    p.add_argument("--installer", choices=["pip", "uv"], default="pip", help="package installer (default pip)")


def dry_run(p: Parser, help: str) -> None:
    p.add_argument("--dry-run", action="store_true", help=help)


def resume_on_login(p: Parser, help: str) -> None:
    p.add_argument("--resume-on-login", action=argparse.BooleanOptionalAction, default=None, help=help)


def fit_flags(p: Parser) -> None:
    """The card and the serving settings a fit is made for (`fit`, and `model fetch`, which fits first)."""
    p.add_argument("--card", default="910B3", help="the card: 910B1, 910B2, 910B3 or 910B4 (default 910B3); any "
                   "other name (310P, 910C) with --hbm-gib and --bandwidth")
    p.add_argument("--hbm-gib", type=float, metavar="N", help="the card's HBM in GiB (default: the card table's)")
    p.add_argument("--bandwidth", type=float, metavar="GBPS",
                   help="peak HBM bandwidth in GB/s (default: 'ascend-setup probe' when run here, else the card table)")
    p.add_argument("--context", type=int, default=32768, help="tokens per sequence for the concurrency (default 32768)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="share of HBM vLLM may use (default 0.9)")
    p.add_argument("--kv-dtype", choices=["bf16", "fp16", "int8"], default="bf16", help="KV cache dtype (default bf16)")
    p.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel cards: weights and KV split over N")
    cann(p, "the row whose known issues apply (default: the installed CANN's, else the newest)")
    workdir(p, "where probe.json is")


def serve_flags(p: Parser) -> None:
    """`serve MODEL [-- ARGS]`; MODEL `status` or `stop [NAME]` reports on or stops a recorded server."""
    p.add_argument("model", metavar="MODEL|status|stop", help="a model directory, or a hub id that 'model fetch' "
                   "fetched; 'status' lists the servers started from the workdir; 'stop [NAME]' stops one")
    p.add_argument("vllm_args", nargs="*", metavar="-- ARGS", help="after --: arguments for 'vllm serve' (validated; "
                   "yours win; --additional-config merged into one)")
    venv(p, "the installed venv (default <workdir>/venv)")
    workdir(p, "where serve/<name>.log, .json and the server records go")
    cann_home(p, "CANN root whose set_env.sh the server runs with")
    p.add_argument("--port", type=int, default=8000, help="the server's port (default 8000)")
    p.add_argument("--tp", type=int, metavar="N", help="tensor-parallel cards (default: one, or as many as --card)")
    p.add_argument("--card", metavar="N[,M...]", help="NPU index(es) to serve on (default: the first --tp cards)")
    p.add_argument("--max-model-len", type=int, metavar="N", help="context length (default: the largest the KV "
                   "budget holds at --concurrency, capped at the model's own maximum)")
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="sequences the KV budget must hold at "
                   "--max-model-len (default 1)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="share of HBM vLLM may use (default 0.9)")
    p.add_argument("--ready-timeout", type=float, metavar="SECONDS", help="start-up deadline (default: from the "
                   "weights' size, plus compile and graph capture)")
    p.add_argument("--measure-tokens", type=int, default=256, metavar="N", help=argparse.SUPPRESS)
    dry_run(p, "print the environment and the command, one item a line with why; start nothing")
    p.add_argument("--detach", action="store_true", help="leave the server running after the measurement "
                   "('serve stop' ends it)")
