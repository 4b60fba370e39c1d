"""Each option that several commands take, defined once (pip's `cmdoptions` style: a factory per option).

A command passes only what differs: its help sentence, and whether the value is required. A path flag's
ASCEND_SETUP_* variable is named from its `paths.Flag`, the one place that reads it (flag first, then the
variable, `~` expanded); `env=False` where the command reads no variable, so the help promises none.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from ascend_setup.cli import values
from ascend_setup.utils.installer_name import DEFAULT_INSTALLER, INSTALLERS
from ascend_setup.utils.paths import CANN_HOME, PYTHON, ROOT, VENV, WORKDIR, Flag

Parser = argparse.ArgumentParser
Number = Union[int, float]


def common(p: Parser, *, json: bool = True) -> None:
    """What every command takes: the matrix in use, and (for every command that reads or reports) --json."""
    p.add_argument("--matrix", metavar="FILE", help="compatibility matrix to use (env ASCEND_SETUP_MATRIX)")
    if json:
        p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def ranged(kind: Callable[[str], Number], low: Number, high: Number, what: str) -> Callable[[str], Number]:
    """A numeric flag's type: a finite number in [low, high], or bad input at parse time with what it measures.

    Every numeric flag declares its range here, so `probe --gib 1e-12` (which measures nothing) or `--tp nan`
    is one line and exit 2 before anything runs, and a test can walk every numeric flag of the parser."""

    def parse(text: str) -> Number:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number ({what})") from None
        if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not {what}: between {low:g} and {high:g}")
        return value

    parse.range = (low, high)  # type: ignore[attr-defined]  # read by the test that walks every numeric flag
    return parse


def model_dir(text: str) -> Path:
    """A served model's directory, as a flag's type: one with a config.json, else bad input at parse time."""
    path = Path(text).expanduser()
    if not (path / "config.json").is_file():
        raise argparse.ArgumentTypeError(f"{text} holds no config.json (give the served model's directory)")
    return path


def card_name(text: str) -> str:
    """A card of fit's card table (910B3, Ascend910B3, 910b3 ...), as a flag's type, spelled as the table does."""
    from ascend_setup.fit.cards import card_key, cards

    known = cards()
    if card_key(text) not in known:
        raise argparse.ArgumentTypeError(f"{text!r} is not a card of fit's table ({', '.join(known)})")
    return card_key(text)


def ranged_list(kind: Callable[[str], Number], low: Number, high: Number, what: str) -> Callable[[str], List[Number]]:
    """A comma-separated list of `ranged` numbers (`--concurrency 1,4,16`): each in [low, high], none twice."""
    one = ranged(kind, low, high, what)

    def parse(text: str) -> List[Number]:
        values = [one(item.strip()) for item in text.split(",")]
        if len(set(values)) != len(values):
            raise argparse.ArgumentTypeError(f"{text} names a value twice ({what})")
        return values

    return parse


class Once(argparse.Action):
    """A flag that a command line may give only one value: `--resume-on-login --no-resume-on-login` contradicts
    itself, and argparse would silently keep the last."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        self.positive = [o for o in option_strings if not o.startswith("--no-")]
        negatives = ["--no-" + o[2:] for o in self.positive if o.startswith("--")]
        super().__init__([*self.positive, *negatives], dest, nargs=0, **kw)

    def __call__(
        self, parser: Parser, namespace: argparse.Namespace, values: Any, option: Optional[str] = None
    ) -> None:
        value = option in self.positive
        given = getattr(namespace, f"_{self.dest}_given", None)
        if given is not None and given != option:
            parser.error(f"{given} and {option} contradict each other: give one")
        setattr(namespace, f"_{self.dest}_given", option)
        setattr(namespace, self.dest, value)


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


def root(
    p: Parser, help: str = "read this directory as / for the container's devices, mounts and users (default /)"
) -> None:
    _path(p, ROOT, help)


def run_root_tools(p: Parser) -> None:
    """The one way to let a --root other than / have its own binaries run (its npu-smi): --root is data."""
    p.add_argument(
        "--run-root-tools",
        action="store_true",
        help="run the --root's own tools (its npu-smi) to learn its card; without it a --root other "
        "than / is only read, never executed",
    )


def cann(p: Parser, help: str = "CANN version: selects a whole matrix row", *, required: bool = False) -> None:
    """The row. Where it is optional it defaults to the installed CANN's row, else the newest (host.cann.row_for);
    audit infers it from the venv instead."""
    p.add_argument("--cann", required=required, help=help)


def target(p: Parser) -> None:
    """The architecture and glibc of a machine other than this one (`plan`, `bundle`)."""
    p.add_argument("--glibc", help="target glibc, e.g. 2.31 (default: this machine's)")
    p.add_argument("--arch", help="target architecture, e.g. aarch64 (default: this machine's)")


def index_url(p: Parser, help: str = "primary package index (default: pip's configuration)") -> None:
    p.add_argument("--index-url", metavar="URL", type=values.index_url("--index-url"), help=help)


def extra_index_url(p: Parser, help: str) -> None:
    p.add_argument(
        "--extra-index-url", metavar="URL", action="append", type=values.index_url("--extra-index-url"), help=help
    )


def index(p: Parser, help: str = "replace a named index (ascend, pytorch-cpu)") -> None:
    """NAME=URL, each checked as it is parsed; `values.index_overrides` makes them one mapping."""
    p.add_argument("--index", metavar="NAME=URL", action="append", type=values.index_override, help=help)


def mirror(p: Parser) -> None:
    p.add_argument(
        "--mirror",
        metavar="auto|none|URL",
        type=values.mirror,
        default="auto",
        help="pick the fastest fresh mirror, use none, or use URL",
    )


def vllm_ascend(
    p: Parser,
    help: str = "for a CANN without a row: derive the row from this vllm-ascend release's metadata on the index",
    *,
    required: bool = False,
) -> None:
    p.add_argument("--vllm-ascend", metavar="VERSION", required=required, help=help)


def soc(
    p: Parser,
    help: str,
    *,
    metavar: str = "SOC_VERSION",
    default: Optional[str] = None,
    type: Callable[[str], Any] = values.soc_version,
) -> None:
    """A SOC_VERSION by default; `plan` and `bundle` also take a device type (`values.device`, `values.npus`)."""
    p.add_argument("--soc", metavar=metavar, default=default, type=type, help=help)


def lock(p: Parser, help: str) -> None:
    p.add_argument("--lock", metavar="FILE", help=help)


def build_deps_url(p: Parser) -> None:
    p.add_argument(
        "--build-deps-url",
        metavar="URL",
        type=values.http_url(
            "--build-deps-url", "for files on this host, copy them into <workdir>/downloads/third-party"
        ),
        help="fetch the source build's third-party archives (json, "
        "abseil-cpp, protobuf, makeself) from URL/<file name> instead of the URLs its CMake files name",
    )


def installer(p: Parser) -> None:
    """uv by default: the demo runs 1.7x faster with it and the kill soak finds no failure; pip stays a choice."""
    p.add_argument(
        "--installer",
        choices=INSTALLERS,
        default=DEFAULT_INSTALLER,
        help=f"package installer (default {DEFAULT_INSTALLER})",
    )


def dry_run(p: Parser, help: str) -> None:
    p.add_argument("--dry-run", action="store_true", help=help)


def resume_on_login(p: Parser, help: str) -> None:
    p.add_argument("--resume-on-login", action=Once, default=None, help=help)


def managed_python(p: Parser, given: str = "") -> None:
    """Where a managed CPython comes from (install, bundle --with-python): `given` names the flag they need."""
    p.add_argument(
        "--python-mirror",
        metavar="URL",
        type=values.http_url(
            "--python-mirror", "a copy of the python-build-standalone releases, laid out as URL/<build>/<file>"
        ),
        help=f"{given}a copy of the python-build-standalone releases "
        "(URL/<build>/<file>), tried before the built-in mirrors for a managed interpreter",
    )
    p.add_argument(
        "--python-builds",
        metavar="FILE",
        help=f"{given}pinned CPython builds (JSON, as the packaged "
        "python_builds.json) instead of the packaged ones (env ASCEND_SETUP_PYTHON_BUILDS)",
    )


def calibration_flags(p: Parser) -> None:
    """This host's decode-speed measurements (recorded by serve): list, forget, or ignore them."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--calibration",
        action="store_true",
        help="list this host's speed measurements on the card "
        "(recorded by serve), each judged against the card's model, and the terms they give",
    )
    group.add_argument(
        "--no-calibration",
        action="store_true",
        help="ignore this host's speed measurements: the card's decode model only",
    )
    p.add_argument(
        "--forget", action="store_true", help="with --calibration: forget this host's measurements on the card"
    )


def fit_flags(p: Parser) -> None:
    """The card and the serving settings a fit is made for (`fit`, and `model fetch`, which fits first)."""
    p.add_argument(
        "--card",
        default="910B3",
        help="the card: 910B1, 910B2, 910B3 or 910B4 (default 910B3); any "
        "other name (310P, 910C) with --hbm-gib and --bandwidth",
    )
    p.add_argument(
        "--hbm-gib",
        type=ranged(float, 1, 4096, "an HBM size in GiB (a 910B3 has 64)"),
        metavar="N",
        help="the card's HBM in GiB (default: the card table's)",
    )
    p.add_argument(
        "--bandwidth",
        type=ranged(float, 1, 100_000, "a bandwidth in GB/s (a 910B3 peaks near 1490)"),
        metavar="GBPS",
        help="peak HBM bandwidth in GB/s (default: 'ascend-setup probe' when run here, else the card table)",
    )
    p.add_argument(
        "--context",
        type=ranged(int, 1, 16 * 1024 * 1024, "a context length in tokens"),
        default=32768,
        help="tokens per sequence for the concurrency (default 32768)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=ranged(float, 0.01, 1, "a share of HBM"),
        default=0.9,
        help="share of HBM vLLM may use (default 0.9)",
    )
    p.add_argument("--kv-dtype", choices=["bf16", "fp16", "int8"], default="bf16", help="KV cache dtype (default bf16)")
    p.add_argument(
        "--tp",
        type=ranged(int, 1, 64, "a number of cards"),
        default=1,
        metavar="N",
        help="tensor-parallel cards: weights and KV split over N",
    )
    profiling_flags(p)
    p.add_argument(
        "--vllm-ascend",
        type=release,
        metavar="VERSION",
        help="the vllm-ascend release whose start-up memory accounting to follow (default 0.23; up to 0.14 "
        "it also counted what the device held before vLLM started)",
    )
    cann(p, "the row whose known issues apply (default: the installed CANN's, else the newest)")
    workdir(p, "where probe.json is")


def release(text: str) -> Tuple[int, int]:
    """A release as (major, minor): 0.11.0rc3 -> (0, 11)."""
    found = re.fullmatch(r"v?(\d{1,3})\.(\d{1,3})(?:\.\d{1,3})?(?:(?:rc|\.post|\.dev)\d{1,5})?", text.strip())
    if not found:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a release (e.g. 0.23.0, 0.11.0rc3)")
    return int(found.group(1)), int(found.group(2))


def profiling_flags(p: Parser) -> None:
    """vLLM's flags that change the memory its start-up profiling takes (fit, and serve passes them on)."""
    p.add_argument(
        "--max-num-batched-tokens",
        type=ranged(int, 1, 16 * 1024 * 1024, "a number of tokens"),
        default=2048,
        metavar="N",
        help="tokens in vLLM's profiling batch (default 2048, vllm serve's; the LLM class uses 8192)",
    )
    p.add_argument(
        "--max-num-seqs",
        type=ranged(int, 1, 1 << 20, "a number of sequences"),
        default=256,
        metavar="N",
        help="rows of logits vLLM's sampler is profiled with (default 256, vLLM's)",
    )
    p.add_argument(
        "--enforce-eager", action="store_true", help="as vLLM's flag: no graph pool, and the eager-mode decode speed"
    )


def index_overrides(p: Parser) -> None:
    """A named index replaced, and whether the user's whole pip configuration applies (plan, install, bundle,
    mirrors, doctor)."""
    index(p, "replace a named index of the row (ascend, pytorch-cpu), e.g. with a mirror of it; repeatable")
    p.add_argument(
        "--respect-pip-config",
        action="store_true",
        help="let your pip configuration (constraint, find-links, extra-index-url, ...) apply; by default "
        "only its index and network settings do",
    )


def hub(p: Parser) -> None:
    """Which model hub a model id is read from (fit, model fetch)."""
    p.add_argument(
        "--source",
        choices=["modelscope", "huggingface"],
        help="the hub for a model id (default: ModelScope, then Hugging Face)",
    )
    p.add_argument("--revision", metavar="R", help="branch, tag or commit (default: master on ModelScope, main on HF)")
    p.add_argument(
        "--endpoint",
        metavar="URL",
        help="the hub's address, e.g. a mirror (default: MODELSCOPE_DOMAIN "
        "or HF_ENDPOINT, else the hub's own); needs --source",
    )
    p.add_argument("--refresh", action="store_true", help="ask the hub again even when this revision is cached")
