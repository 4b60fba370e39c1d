"""`ascend-setup fit` and `ascend-setup probe`: will this model run on this card, and how fast."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_field, print_prose, stdout_console
from ascend_setup.errors import BadInput
from ascend_setup.utils.paths import CANN_HOME, VENV, cache_dir, check_path_length, resolve_workdir

if TYPE_CHECKING:  # imported where a run needs them: the parser (--help) stays light
    from ascend_setup.fit.calibration import Calibration
    from ascend_setup.fit.cards import Card
    from ascend_setup.fit.estimate import Fit
    from ascend_setup.fit.model_files import ModelFiles
    from ascend_setup.fit.profile import Serving

GIB = 1024**3


def model_files(args: argparse.Namespace) -> Tuple[ModelFiles, object]:
    """(the model's files, the hub listing or None): a local path when it exists, else a hub id."""
    from ascend_setup.fit.model_files import local_files
    from ascend_setup.hub.base import MODEL_ID, check_model_id

    path = Path(args.model).expanduser()
    check_path_length(path.absolute(), "MODEL")
    if path.exists() or not MODEL_ID.match(args.model):
        if not path.exists():
            raise BadInput(
                f"MODEL {path.absolute()} does not exist",
                hint="a model directory (config.json, *.safetensors), its config.json, or a hub id",
            )
        return local_files(path.absolute()), None
    from ascend_setup.hub.remote import remote_files
    from ascend_setup.index.pipconfig import trust_for_this_run

    if args.endpoint and not args.source:
        raise BadInput("--endpoint needs --source modelscope or --source huggingface (it is one hub's address)")
    trust_for_this_run()
    return remote_files(
        check_model_id(args.model),
        source=args.source,
        revision=args.revision,
        endpoint_url=args.endpoint,
        cache=cache_dir(),
        refresh=args.refresh,
    )


def check_flags(args: argparse.Namespace) -> Card:
    """The card the flags name (their ranges are the parser's: flags.fit_flags)."""
    from ascend_setup.fit.cards import card_for

    return card_for(args.card, args.hbm_gib, args.bandwidth)


def host_calibration(args: argparse.Namespace, card: Card, bandwidth: Optional[float], cann: str) -> Calibration:
    """This host's measurements on the card, judged against the card's model at the fit's bandwidth (the card's
    when none is given) and fitted (the card's terms when there are none)."""
    from ascend_setup.fit.calibration import calibrate, load_points

    return calibrate(load_points(card.name), card.decode, bandwidth or card.peak_gbps, tp=args.tp, cann=cann)


def bandwidth_of(args: argparse.Namespace) -> Tuple[Optional[float], str]:
    """(the bandwidth a fit uses, where from): --bandwidth, else an NPU probe here, else the card table's."""
    from ascend_setup.fit.estimate import probed_bandwidth

    probed = probed_bandwidth(resolve_workdir(args.workdir, mode="read"))
    return (args.bandwidth, "flag") if args.bandwidth else (probed, "probe") if probed else (None, "card-table")


def serving_of(args: argparse.Namespace) -> Serving:
    from ascend_setup.fit.profile import Serving

    serving = Serving(args.max_num_batched_tokens, args.max_num_seqs, args.enforce_eager)
    if getattr(args, "vllm_ascend", None):
        serving.vllm_ascend = args.vllm_ascend
    return serving


def with_probed_memory(args: argparse.Namespace, card: Card) -> Card:
    """The card with this host's own device-visible memory when `probe` recorded it (and --hbm-gib is not given)."""
    from ascend_setup.fit.cards import with_visible
    from ascend_setup.fit.estimate import probed_memory

    total = None if args.hbm_gib else probed_memory(resolve_workdir(args.workdir, mode="read"))
    return (
        with_visible(card, total, "this host: torch_npu total memory recorded by 'ascend-setup probe'")
        if total
        else card
    )


def fit_model(args: argparse.Namespace, files: ModelFiles, card: Card, *, use_calibration: bool = True) -> Fit:
    from ascend_setup.fit.estimate import estimate
    from ascend_setup.host.cann import primary_cann, row_for
    from ascend_setup.matrix import load_matrix

    card = with_probed_memory(args, card)
    bandwidth, source = bandwidth_of(args)
    row = row_for(load_matrix(args.matrix), args.cann, primary_cann(CANN_HOME.value(None)[0]))  # as doctor, mirrors
    calibration = host_calibration(args, card, bandwidth, row.cann) if use_calibration else None
    return estimate(
        files,
        card,
        row,
        context=args.context,
        utilisation=args.gpu_memory_utilization,
        kv_dtype=args.kv_dtype,
        bandwidth=bandwidth,
        bandwidth_source=source,
        tp=args.tp,
        calibration=calibration,
        serving=serving_of(args),
    )


def print_fit(fit: Fit) -> None:
    """Sentences wrap at words at the terminal's width; the serve command stays one line, to be copied."""
    out = stdout_console()
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


def run_calibration(args: argparse.Namespace, card: Card, output: Output) -> int:
    """`fit --calibration [--forget]`: this host's measurements on the card, each judged, and the terms they
    give; --forget removes them."""
    from ascend_setup.fit.calibration import forget_points, points_path
    from ascend_setup.host.cann import primary_cann, row_for
    from ascend_setup.matrix import load_matrix

    if args.forget:
        gone = forget_points(card.name)
        if args.json:
            output.print_json({"card": card.name, "forgotten": gone, "file": str(points_path())})
        else:
            stdout_console().print(
                f"forgot {gone} measurement{'' if gone == 1 else 's'} on {card.name} ({points_path()})",
                soft_wrap=True,
                markup=False,
            )
        return 0
    bandwidth, _ = bandwidth_of(args)
    row = row_for(load_matrix(args.matrix), args.cann, primary_cann(CANN_HOME.value(None)[0]))
    calibration = host_calibration(args, card, bandwidth, row.cann)
    summary = {
        "card": card.name,
        "file": str(points_path()),
        "tp": args.tp,
        "cann": row.cann,
        "method": calibration.method,
        "speed_source": calibration.source,
        "eta": round(calibration.terms.eta, 4),
        "t_fixed_ms": round(calibration.terms.t_fixed_s * 1000, 3),
        "points": [j.to_json() for j in calibration.points],
    }
    if args.json:
        output.print_json(summary)
        return 0
    out = stdout_console()
    print_prose(
        out,
        f"{card.name} on this host, TP {args.tp}, CANN {row.cann} row: {len(calibration.points)} "
        f"measurement{'' if len(calibration.points) == 1 else 's'} in {summary['file']}",
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
    return 0


def run_fit(args: argparse.Namespace, output: Output) -> int:
    card = check_flags(args)
    if args.forget and not args.calibration:
        raise BadInput("--forget goes with --calibration (fit --calibration --forget)")
    if args.calibration:
        if args.model:
            raise BadInput("--calibration lists this host's measurements on a card: it takes no MODEL")
        return run_calibration(args, card, output)
    if not args.model:
        raise BadInput(
            "fit needs MODEL (a model directory, its config.json or a hub id)",
            hint="or 'fit --calibration' to list this host's speed measurements",
        )
    files, _ = model_files(args)
    fit = fit_model(args, files, card, use_calibration=not args.no_calibration)
    if args.no_calibration:
        fit.speed_source += "; this host's measurements ignored (--no-calibration)"
    if args.json:
        output.print_json(fit.to_json())
    else:
        print_fit(fit)
    return 1 if fit.blockers else 0


def run_probe_command(args: argparse.Namespace, output: Output) -> int:
    from ascend_setup.dists.venv_reader import read_pyvenv_cfg, venv_python
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.fit.probe import run_probe, save_probe
    from ascend_setup.host.cann import primary_cann
    from ascend_setup.host.setenv import capture_env

    workdir = resolve_workdir(args.workdir)
    venv = VENV.path(args.venv)[0] or Workdir(workdir).venv
    if read_pyvenv_cfg(venv) is None or not venv_python(venv).exists():
        raise BadInput(f"--venv {venv} is not a working venv", hint="run 'ascend-setup install' first, or pass --venv")
    env = None
    if args.device.startswith("npu"):
        found = primary_cann(CANN_HOME.value(args.cann_home)[0])
        env = capture_env(found.set_env_scripts()).apply() if found else None
    result: Dict[str, Any] = run_probe(venv_python(venv), args.device, int(args.gib * GIB), env=env)  # its JSON
    path = save_probe(workdir, result)
    if args.json:
        output.print_json({**result, "saved": str(path)})
        return 0
    stdout_console().print(
        f"{args.device} ({result['backend']}): {result['gbps']:.0f} GB/s copy bandwidth "
        f"(2 x {int(result['bytes']) / GIB:.2f} GiB x {result['copies']} copies in "
        f"{result['seconds']:.2f} s); saved to {path}"
        + ("; 'ascend-setup fit' uses it" if args.device.startswith("npu") else ""),
        soft_wrap=True,
        markup=False,
    )
    return 0


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
    p.set_defaults(func=run_fit)


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
    p.set_defaults(func=run_probe_command)


ARGUMENTS = {"fit": fit_arguments, "probe": probe_arguments}
