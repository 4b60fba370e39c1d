"""`ascend-setup fit` and `ascend-setup probe`: will this model run on this card, and how fast."""

from __future__ import annotations

import argparse
from pathlib import Path

from ascend_setup.errors import BadInput
from ascend_setup.fit.estimate import Card, card_named, estimate, probed_bandwidth
from ascend_setup.fit.probe import run_probe, save_probe
from ascend_setup.host.cann import primary_cann
from ascend_setup.host.setenv import capture_env
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.paths import check_path_length, env_or, resolve_workdir
from ascend_setup.render import print_json, stdout_console
from ascend_setup.venvinfo import read_pyvenv_cfg, venv_python

GIB = 1024 ** 3


def run_fit(args: argparse.Namespace) -> int:
    model = Path(args.model).expanduser().absolute()
    check_path_length(model, "MODEL")
    if not model.exists():
        raise BadInput(f"MODEL {model} does not exist", hint="a model directory (config.json, *.safetensors) or a config.json")
    if args.context <= 0 or not 0 < args.gpu_memory_utilization <= 1:
        raise BadInput("--context must be positive and --gpu-memory-utilization in (0, 1]")
    if args.bandwidth is not None and not 0 < args.bandwidth <= 100_000:
        raise BadInput(f"--bandwidth {args.bandwidth:g} is not a bandwidth in GB/s (a 910B3 peaks near 1490)")
    if args.hbm_gib is not None and not 0 < args.hbm_gib <= 4096:
        raise BadInput(f"--hbm-gib {args.hbm_gib:g} is not an HBM size in GiB (a 910B3 has 64)")
    card = card_named(args.card)
    if args.hbm_gib:
        card = Card(card.name, args.hbm_gib, card.peak_gbps, "--hbm-gib")
    workdir = resolve_workdir(args.workdir, mode="read")
    probed = probed_bandwidth(workdir)
    bandwidth, source = (args.bandwidth, "flag") if args.bandwidth else (probed, "probe") if probed else \
        (None, "card-table")
    row = select_row(load_matrix(args.matrix), args.cann)
    fit = estimate(model, card, row, context=args.context, utilisation=args.gpu_memory_utilization,
                   kv_dtype=args.kv_dtype, bandwidth=bandwidth, bandwidth_source=source)
    if args.json:
        print_json(fit.to_json())
        return 1 if fit.blockers else 0
    out = stdout_console()
    out.print(f"{fit.model} on an Ascend {fit.card}: {fit.kv_tokens:,} KV tokens, {fit.concurrency:.1f} sequences of "
              f"{args.context:,}, about {fit.decode_tok_s:.0f} tok/s single-stream", soft_wrap=True, markup=False)
    for line in fit.arithmetic:
        out.print(f"  {line}", soft_wrap=True, markup=False)
    out.print(f"  bandwidth from the {source}" + ("" if source != "card-table" else f": {card.source}"),
              soft_wrap=True, markup=False)
    for blocker in fit.blockers:
        out.print(f"blocker: {blocker}", soft_wrap=True, markup=False)
    for note in fit.notes:
        out.print(f"note: {note}", soft_wrap=True, markup=False)
    if fit.serve_args or fit.env:
        env = " ".join(f"{k}={v}" for k, v in fit.env.items())
        out.print("serve with: " + " ".join(filter(None, [env, "vllm serve MODEL", *(f"'{a}'" if "{" in a else a
                                                                                    for a in fit.serve_args)])),
                  soft_wrap=True, markup=False)
    return 1 if fit.blockers else 0


def run_probe_command(args: argparse.Namespace) -> int:
    if not 0 < args.gib <= 64:
        raise BadInput(f"--gib {args.gib:g} must be a tensor size between 0 and 64 GiB (the report used 2)")
    workdir = resolve_workdir(args.workdir)
    venv_value = env_or(args.venv, "ASCEND_SETUP_VENV")
    venv = Path(venv_value).expanduser().absolute() if venv_value else workdir / "venv"
    if read_pyvenv_cfg(venv) is None or not venv_python(venv).exists():
        raise BadInput(f"--venv {venv} is not a working venv", hint="run 'ascend-setup install' first, or pass --venv")
    env = None
    if args.device.startswith("npu"):
        found = primary_cann(env_or(args.cann_home, "ASCEND_SETUP_CANN_HOME"))
        env = capture_env(found.set_env_scripts()).apply() if found else None
    result = run_probe(venv_python(venv), args.device, int(args.gib * GIB), env=env)
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
