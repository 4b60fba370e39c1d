"""`ascend-setup fit` and `ascend-setup probe`: will this model run on this card, and how fast."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, Tuple

from ascend_setup.cli.render import print_field, print_json, print_prose, stdout_console
from ascend_setup.dists.venv import read_pyvenv_cfg, venv_python
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import BadInput
from ascend_setup.fit.estimate import Card, Fit, card_for, estimate, probed_bandwidth
from ascend_setup.fit.model import ModelFiles, local_files
from ascend_setup.fit.probe import run_probe, save_probe
from ascend_setup.host.cann import primary_cann, row_for
from ascend_setup.host.setenv import capture_env
from ascend_setup.hub.base import MODEL_ID, check_model_id
from ascend_setup.matrix import load_matrix
from ascend_setup.utils.paths import CANN_HOME, VENV, cache_dir, check_path_length, resolve_workdir

GIB = 1024 ** 3


def model_files(args: argparse.Namespace) -> Tuple[ModelFiles, object]:
    """(the model's files, the hub listing or None): a local path when it exists, else a hub id."""
    path = Path(args.model).expanduser()
    check_path_length(path.absolute(), "MODEL")
    if path.exists() or not MODEL_ID.match(args.model):
        if not path.exists():
            raise BadInput(f"MODEL {path.absolute()} does not exist",
                           hint="a model directory (config.json, *.safetensors), its config.json, or a hub id")
        return local_files(path.absolute()), None
    from ascend_setup.hub.remote import remote_files

    if args.endpoint and not args.source:
        raise BadInput("--endpoint needs --source modelscope or --source huggingface (it is one hub's address)")
    return remote_files(check_model_id(args.model), source=args.source, revision=args.revision,
                        endpoint_url=args.endpoint, cache=cache_dir(), refresh=args.refresh)


def check_flags(args: argparse.Namespace) -> Card:
    if args.context <= 0 or not 0 < args.gpu_memory_utilization <= 1:
        raise BadInput("--context must be positive and --gpu-memory-utilization in (0, 1]")
    if args.bandwidth is not None and not 0 < args.bandwidth <= 100_000:
        raise BadInput(f"--bandwidth {args.bandwidth:g} is not a bandwidth in GB/s (a 910B3 peaks near 1490)")
    if args.hbm_gib is not None and not 0 < args.hbm_gib <= 4096:
        raise BadInput(f"--hbm-gib {args.hbm_gib:g} is not an HBM size in GiB (a 910B3 has 64)")
    if not 1 <= args.tp <= 64:
        raise BadInput(f"--tp {args.tp} must be between 1 and 64 cards")
    return card_for(args.card, args.hbm_gib, args.bandwidth)


def fit_model(args: argparse.Namespace, files: ModelFiles, card: Card) -> Fit:
    workdir = resolve_workdir(args.workdir, mode="read")
    probed = probed_bandwidth(workdir)
    bandwidth, source = (args.bandwidth, "flag") if args.bandwidth else (probed, "probe") if probed else \
        (None, "card-table")
    row = row_for(load_matrix(args.matrix), args.cann, primary_cann(CANN_HOME.value(None)[0]))  # as doctor, mirrors
    return estimate(files, card, row, context=args.context, utilisation=args.gpu_memory_utilization,
                    kv_dtype=args.kv_dtype, bandwidth=bandwidth, bandwidth_source=source, tp=args.tp)


def print_fit(fit: Fit) -> None:
    """Sentences wrap at words at the terminal's width; the serve command stays one line, to be copied."""
    out = stdout_console()
    print_prose(out, fit.headline, "  ", "")
    print_field(out, "figures from", str(fit.origin))
    for line in fit.arithmetic:
        print_prose(out, line, "    ", "  ")
    print_prose(out, f"card: {fit.card_source}", "    ", "  ")
    print_prose(out, f"bandwidth from the {fit.bandwidth_source}" + ("" if fit.bandwidth_source != "card-table" else
                                                                    " (see card)"), "    ", "  ")
    for label, texts in (("blocker", fit.blockers), ("warning", fit.warnings), ("note", fit.notes)):
        for text in texts:
            print_prose(out, f"{label}: {text}", "  ", "")
    if fit.serve_args or fit.env:
        env = " ".join(f"{k}={v}" for k, v in fit.env.items())
        out.print("serve with: " + " ".join(filter(None, [env, "vllm serve MODEL", *(f"'{a}'" if "{" in a else a
                                                                                    for a in fit.serve_args)])),
                  soft_wrap=True, markup=False)


def run_fit(args: argparse.Namespace) -> int:
    card = check_flags(args)
    files, _ = model_files(args)
    fit = fit_model(args, files, card)
    if args.json:
        print_json(fit.to_json())
    else:
        print_fit(fit)
    return 1 if fit.blockers else 0


def run_probe_command(args: argparse.Namespace) -> int:
    if not 0 < args.gib <= 64:
        raise BadInput(f"--gib {args.gib:g} must be a tensor size between 0 and 64 GiB (the report used 2)")
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
        print_json({**result, "saved": str(path)})
        return 0
    stdout_console().print(f"{args.device} ({result['backend']}): {result['gbps']:.0f} GB/s copy bandwidth "
                           f"(2 x {int(result['bytes']) / GIB:.2f} GiB x {result['copies']} copies in "
                           f"{result['seconds']:.2f} s); saved to {path}" +
                           ("; 'ascend-setup fit' uses it" if args.device.startswith("npu") else ""),
                           soft_wrap=True, markup=False)
    return 0
