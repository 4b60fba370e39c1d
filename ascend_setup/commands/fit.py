"""`ascend-setup fit` and `ascend-setup probe`: will this model run on this card, and how fast. Thin: the fit
room reads the model, the card, this host's probe and measurements (fit/request.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type, Union

from pydantic import BaseModel, ConfigDict, RootModel

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.fit_options import FitFlagOptions, HubOptions
from ascend_setup.cli.render import Output, print_field, print_prose
from ascend_setup.errors import EXIT_FINDINGS, EXIT_OK, BadInput

if TYPE_CHECKING:  # the fit room is imported when a fit runs, not when its options are parsed
    from rich.console import Console

    from ascend_setup.fit.calibration import Calibration
    from ascend_setup.fit.estimate import Fit

GIB = 1024**3
Number = Union[int, float]


class FitOptions(FitFlagOptions, HubOptions):
    model: Optional[str] = None
    calibration: bool = False
    no_calibration: bool = False
    forget: bool = False


class ProbeOptions(Options):
    venv: Optional[str] = None
    device: str = "npu:0"
    gib: float = 2.0
    cann_home: Optional[str] = None
    workdir: Optional[str] = None


class FitDocument(BaseModel):
    """`fit MODEL --json`: fit's estimate (fit/estimate.py `Fit`), every figure and where it came from (a
    figure is a number as the estimate computed it: ints stay ints, floats floats)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    origin: str
    card: str
    card_source: str
    tp: int
    fits: bool
    headline: str
    weights_bytes: Number
    weights_per_card_bytes: Number
    weights_read_per_token: Number
    weights_source: str
    vision_bytes: Number
    kv_bytes_per_token: Number
    kv_layers: Dict[str, Number]
    state_bytes_per_sequence: Number
    kv_tokens: Number
    concurrency: Number
    kv_tokens_low: Number
    concurrency_low: Number
    kv_block_tokens: Number
    kv_available_bytes: Number
    kv_available_low_bytes: Number
    kv_pool: Dict[str, Any]
    memory_terms: List[Dict[str, Any]]
    device_memory_bytes: Number
    device_memory_source: str
    decode_tok_s: Optional[Number]
    decode_tok_s_at_context: Optional[Number]
    decode_tok_s_eager: Optional[Number]
    decode: Dict[str, Any]
    speed_source: str
    bandwidth_gbps: Number
    bandwidth_source: str
    blockers: List[str]
    warnings: List[str]
    serve_args: List[str]
    env: Dict[str, str]
    notes: List[str]
    arithmetic: List[str]
    calibration: List[Dict[str, Any]]


class CalibrationDocument(BaseModel):
    """`fit --calibration --json`: this host's measurements on the card, each judged, and the terms they give."""

    model_config = ConfigDict(extra="forbid")

    card: str
    file: str
    tp: int
    cann: str
    method: str
    speed_source: str
    eta: Number
    t_fixed_ms: Number
    points: List[Dict[str, Any]]


class ForgottenDocument(BaseModel):
    """`fit --calibration --forget --json`: how many measurements on the card were removed, from which file."""

    model_config = ConfigDict(extra="forbid")

    card: str
    forgotten: int
    file: str


class FitCommandDocument(RootModel[Union[FitDocument, CalibrationDocument, ForgottenDocument]]):
    """`fit --json`: the estimate, or (with --calibration) the measurements, or (with --forget) what went."""


class ProbeDocument(BaseModel):
    """`probe --json`: the copy bandwidth measured in the venv, and where it was saved for fit."""

    model_config = ConfigDict(extra="forbid")

    device: str
    backend: str
    bytes: int
    copies: int
    seconds: Number
    gbps: Number
    saved: str


class NpuProbeDocument(ProbeDocument):
    """On an NPU, the device's total memory too (what vLLM multiplies by --gpu-memory-utilization), and what the
    probe found in use when it started (its context and the card's idle use: what a vLLM worker finds)."""

    total_memory: int
    in_use_memory: int


class ProbeCommandDocument(RootModel[Union[NpuProbeDocument, ProbeDocument]]):
    """`probe --json` on an NPU, or on the CPU."""


DOCUMENTS: Dict[str, Type[BaseModel]] = {"fit": FitCommandDocument, "probe": ProbeCommandDocument}


def run_fit(options: FitOptions, output: Output) -> Result:
    from ascend_setup.fit.fit_request import calibration_summary, card_of_flags, fit_model, forget, model_files

    card = card_of_flags(options)
    if options.forget and not options.calibration:
        raise BadInput("--forget goes with --calibration (fit --calibration --forget)")
    if options.calibration:
        if options.model:
            raise BadInput("--calibration lists this host's measurements on a card: it takes no MODEL")
        if options.forget:
            gone = forget(card)
            return Result(EXIT_OK, FitCommandDocument(ForgottenDocument(**gone)), lambda c: render_forgotten(c, gone))
        summary, calibration = calibration_summary(options, card)
        return Result(
            EXIT_OK,
            FitCommandDocument(CalibrationDocument(**summary)),
            lambda c: render_calibration(c, summary, calibration),
        )
    if not options.model:
        raise BadInput(
            "fit needs MODEL (a model directory, its config.json or a hub id)",
            hint="or 'fit --calibration' to list this host's speed measurements",
        )
    files, _ = model_files(options.model, options)
    fit = fit_model(options, files, card, use_calibration=not options.no_calibration)
    if options.no_calibration:
        fit.speed_source += "; this host's measurements ignored (--no-calibration)"
    return Result(
        EXIT_FINDINGS if fit.blockers else EXIT_OK,
        FitCommandDocument(FitDocument(**fit.to_json())),
        lambda c: render_fit(c, fit),
    )


def render_fit(out: Console, fit: Fit) -> None:
    """Sentences wrap at words at the terminal's width; the serve command stays one line, to be copied."""
    print_prose(out, fit.headline, "  ", "")
    print_field(out, "figures from", str(fit.origin))
    for line in fit.arithmetic:
        print_prose(out, line, "    ", "  ")
    print_prose(out, f"card: {fit.card_source}", "    ", "  ")
    print_prose(
        out,
        f"bandwidth from the {fit.bandwidth_source}" + ("" if fit.bandwidth_source != "card-table" else " (see card)"),
        "    ",
        "  ",
    )
    print_prose(out, f"speed: {fit.speed_source}", "    ", "  ")
    for label, texts in (("blocker", fit.blockers), ("warning", fit.warnings), ("note", fit.notes)):
        for text in texts:
            print_prose(out, f"{label}: {text}", "  ", "")
    if fit.serve_args or fit.env:
        env = " ".join(f"{k}={v}" for k, v in fit.env.items())
        out.print(
            "serve with: "
            + " ".join(filter(None, [env, "vllm serve MODEL", *(f"'{a}'" if "{" in a else a for a in fit.serve_args)])),
            soft_wrap=True,
            markup=False,
        )


def render_forgotten(out: Console, gone: Dict[str, Any]) -> None:
    count = gone["forgotten"]
    out.print(
        f"forgot {count} measurement{'' if count == 1 else 's'} on {gone['card']} ({gone['file']})",
        soft_wrap=True,
        markup=False,
    )


def render_calibration(out: Console, summary: Dict[str, Any], calibration: Calibration) -> None:
    print_prose(
        out,
        f"{summary['card']} on this host, TP {summary['tp']}, CANN {summary['cann']} row: "
        f"{len(calibration.points)} measurement{'' if len(calibration.points) == 1 else 's'} in {summary['file']}",
        "  ",
        "",
    )
    for j in calibration.points:
        p = j.point
        print_prose(
            out,
            f"{p.measured_at} {p.model}: {p.tok_s:.1f} tok/s measured, {j.predicted.tok_s:.1f} by the "
            f"card's model, {p.bytes_per_token / 1e9:.2f} GB per token, TP {p.tp}, "
            f"{'graph' if p.graph_mode else 'eager'} mode, CANN {p.cann}, {j.bound}-bound: "
            + ("used" if j.used else f"not used ({j.why})"),
            "    ",
            "  ",
        )
    print_prose(
        out,
        f"speed: {calibration.source}; eta {calibration.terms.eta:.3f}, t_fixed "
        f"{calibration.terms.t_fixed_s * 1000:.2f} ms",
        "  ",
        "",
    )


def run_probe_command(options: ProbeOptions, output: Output) -> Result:
    from ascend_setup.fit.probe import probe_here

    result, path = probe_here(options.workdir, options.venv, options.cann_home, options.device, int(options.gib * GIB))
    document = ProbeCommandDocument.model_validate({**result, "saved": str(path)})
    return Result(EXIT_OK, document, lambda c: render_probe(c, options.device, result, str(path)))


def render_probe(out: Console, device: str, result: Dict[str, Any], path: str) -> None:
    out.print(
        f"{device} ({result['backend']}): {result['gbps']:.0f} GB/s copy bandwidth "
        f"(2 x {int(result['bytes']) / GIB:.2f} GiB x {result['copies']} copies in "
        f"{result['seconds']:.2f} s); saved to {path}"
        + (
            f"; {int(result['total_memory']) / GIB:.2f} GiB visible, {int(result['in_use_memory']) / GIB:.2f} GiB "
            "of it in use when a process starts; 'ascend-setup fit' uses them"
            if "in_use_memory" in result
            else ""
        ),
        soft_wrap=True,
        markup=False,
    )


def fit_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    p.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        help="a model directory (config.json, *.safetensors), its "
        "config.json, or a hub id (Qwen/Qwen3-8B: reads its small files and safetensors headers, never its "
        "weights); not with --calibration",
    )
    flags.fit_flags(p)
    flags.calibration_flags(p)
    flags.hub(p)
    p.set_defaults(func=run_fit, options=FitOptions)


def probe_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.venv(p, "the installed venv (default <workdir>/venv)")
    p.add_argument("--device", default="npu:0", help="npu:N, or cpu to run the same code path without an NPU")
    p.add_argument(
        "--gib",
        type=flags.ranged(float, 0.001, 64, "a tensor size in GiB that a copy can time"),
        default=2.0,
        help="tensor size in GiB (default 2)",
    )
    flags.cann_home(p, "CANN root for the NPU's environment")
    flags.workdir(p, "where probe.json is written")
    p.set_defaults(func=run_probe_command, options=ProbeOptions)


ARGUMENTS = {"fit": fit_arguments, "probe": probe_arguments}
