"""`ascend-setup doctor`: host checks with fixes."""

from __future__ import annotations

import argparse
import dataclasses
import platform
from pathlib import Path
from typing import Optional

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_items, print_table, stderr_console, stdout_console, terminal_safe
from ascend_setup.container.inside import add_container_checks
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import AscendSetupError, BadInput, named_by
from ascend_setup.fleet.target import FleetTarget, fleet_target, install_interpreter
from ascend_setup.host.cann import detect_cann, row_for
from ascend_setup.host.doctor_checks import interpreters_to_check, run_doctor
from ascend_setup.index.pipconfig import PipSettings, network_settings_for_this_run, pip_settings
from ascend_setup.index.urls import index_overrides
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.newcann import provenance_line, with_derived_row
from ascend_setup.nodes.inventory import load_inventory
from ascend_setup.nodes.multinode import Preflight, run_preflight
from ascend_setup.nodes.node_facts import gather
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.steps.options import which_index
from ascend_setup.utils.paths import CANN_HOME, PYTHON, VENV, check_dir_path, resolve_workdir, root_dir


def target_line(t: FleetTarget) -> str:
    where = f"install target: {t.arch} / glibc {t.glibc} / Python {t.python or '?'} / SOC {t.soc or '?'}"
    if t.unknown:
        return f"{where} ({'; '.join(t.unknown)})"
    return f"{where}: lock {t.lock_name}, wheelhouse key {t.wheelhouse_key}"


def print_preflight(result: Preflight) -> None:
    """A table of the nodes, one of each node's NPUs, every problem with its fix, then each node's block."""
    console = stdout_console()
    rows = []
    for v in result.views:
        f = v.facts
        if f is None:
            rows.append([v.name, "no answer", "", "", "", ""])
            continue
        up = sum(n.link == "UP" for n in f.npus)
        rows.append([v.name, f.hostname, f.cann or "-", f.driver or "-", f.row or "-", f"{up}/{len(f.npus)} up"])
    print_table(
        console,
        f"{len(result.views)} nodes ({result.seconds:.1f} s)",
        ["node", "host", "CANN", "driver", "row", "NPUs"],
        rows,
    )
    for v in result.views:
        if v.facts is not None and v.facts.npus:
            print_table(
                console,
                f"{v.name}: NPUs",
                ["NPU", "link", "IP", "health", "TLS"],
                [
                    [str(n.id), n.link or "?", n.ip or "-", n.health or "?", "-" if n.tls is None else str(n.tls)]
                    for n in v.facts.npus
                ],
            )
    bad = [o for o in result.pings if not o.ok]
    console.print(
        terminal_safe(
            f"NPU pings: {len(result.pings) - len(bad)} of {len(result.pings)} answered"
            + (f" ({result.note})" if result.note else "")
        ),
        soft_wrap=True,
        markup=False,
    )
    print_items(
        console,
        [(p.severity, p.node or "all nodes", p.check) for p in result.problems],
        [[p.message, f"fix: {p.fix}"] for p in result.problems],
    )
    for name, lines in result.env.items():
        console.print(
            terminal_safe(f"# {name}: the environment to serve across nodes (vllm-ascend 0.23)"),
            soft_wrap=True,
            markup=False,
        )
        for line in lines:
            console.print(terminal_safe(line), soft_wrap=True, markup=False)
    fails = sum(p.severity == "fail" for p in result.problems)
    console.print(f"[red]{fails} problem(s) across the nodes[/red]" if fails else "[green]no node problem[/green]")


def run_nodes(args: argparse.Namespace, output: Output) -> int:
    inventory = load_inventory(args.nodes)
    if args.node_timeout is not None:
        inventory = dataclasses.replace(inventory, timeout=args.node_timeout)
    result = run_preflight(inventory)
    if args.json:
        output.print_json(result.to_json())
    else:
        print_preflight(result)
    return 1 if result.failed else 0


def run(args: argparse.Namespace, output: Output) -> int:
    if args.node_facts:  # one node's facts, for a controller's `doctor --nodes` (always JSON)
        cann_home, _ = CANN_HOME.value(args.cann_home)
        output.print_json(gather(cann_home=cann_home, matrix_file=args.matrix).model_dump())
        return 0
    if args.nodes:
        return run_nodes(args, output)
    workdir = resolve_workdir(args.workdir, mode="read")  # doctor only reads: a missing one is no problem
    root = root_dir(args.root)

    venv, venv_source = VENV.path(args.venv)
    venv = venv or Workdir(workdir).venv
    check_dir_path(venv, venv_source, mode="read")
    matrix = load_matrix(args.matrix).with_indexes(index_overrides(args.index))
    try:
        settings: Optional[PipSettings] = network_settings_for_this_run(pip_settings(respect=args.respect_pip_config))
    except AscendSetupError:
        settings = None
    cann_home, home_source = CANN_HOME.value(args.cann_home)
    if cann_home and not Path(cann_home).is_dir():
        raise BadInput(f"{home_source} {cann_home} is not a directory")
    python, python_source = PYTHON.value(args.python)
    soc = args.soc  # checked as the flag was parsed
    index = which_index(args.index_url, None, lambda: settings.index if settings else "")
    with named_by(python_source):
        # searched once: the python check and the install's choice
        interpreters = interpreters_to_check(python, Workdir(workdir).pythons)
    if args.cann:
        matrix, derived = with_derived_row(matrix, args.cann, args.vllm_ascend, lambda: index)
        if derived is not None:
            stderr_console().print(provenance_line(derived, matrix), soft_wrap=True, markup=False)
    installs = detect_cann(cann_home)
    row = row_for(matrix, args.cann, installs[0] if installs else None).for_arch(platform.machine())
    sources = IndexSources.for_row(matrix, row, index)
    interpreter, no_interpreter = install_interpreter(row, sources, python, interpreters)  # the install's, once
    report = run_doctor(
        row,
        installs,
        interpreters,
        cann_home=cann_home,
        workdir=workdir,
        venv=venv,
        indexes=sources.as_dict(),
        settings=settings,
        install_python=interpreter,
        soc=soc,
    )
    add_container_checks(report, root, venv)  # only in a container: what its `docker run` left out
    target = fleet_target(
        row,
        sources,
        workdir=workdir,
        interpreter=interpreter,
        no_interpreter=no_interpreter,
        soc=soc or report.facts["npu"]["soc_version"],
        cann_installed=installs[0].version if installs else None,
    )
    report.facts["target"] = target.to_json()
    if args.json:
        output.print_json(report.to_json())
        return 1 if report.failed else 0
    console = stdout_console()
    print_items(
        console,
        [(c.status, c.id) for c in report.checks],
        [[c.detail, f"fix: {c.fix}" if c.fix and c.status != "pass" else ""] for c in report.checks],
    )
    if report.bare:
        console.print(
            "This machine has no CANN toolkit and no NPU: it cannot run vLLM-Ascend. This forecasts an "
            "install for an Atlas A2 host (Ubuntu 20.04) from here:"
        )
        console.print(
            f"  ascend-setup plan --cann {report.facts['row']} --glibc 2.31 --arch aarch64 --python 3.11",
            soft_wrap=True,
            markup=False,
        )
    console.print(target_line(target), markup=False)
    console.print("[red]some checks failed[/red]" if report.failed else "[green]no check failed[/green]")
    return 1 if report.failed else 0


def doctor_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.cann(p, "row to check against (default: the installed CANN's, else the newest)")
    flags.cann_home(p, "CANN root to check")
    flags.workdir(p, "workdir whose disk and locks to check")
    flags.venv(p, "venv to check for system site-packages")
    flags.python(p, "check this interpreter instead of searching")
    flags.soc(p, "the build target install would get (default: from npu-smi)")
    flags.vllm_ascend(p)
    flags.root(p)
    flags.index_url(
        p,
        "primary index the install would use, asked which Pythons the row's wheels exist for "
        "(default: pip's configuration)",
    )
    flags.index_overrides(p)
    nodes = p.add_mutually_exclusive_group()
    nodes.add_argument(
        "--nodes",
        metavar="FILE",
        help="multi-node preflight of the nodes FILE lists (YAML: 'nodes:' "
        "with each node's name and the 'run' prefix that reaches it, default 'ssh NAME'; or an Ansible "
        "inventory): versions, NPU links and pings, NIC variables, ports, clocks; prints each node's "
        "serving environment",
    )
    nodes.add_argument(
        "--node-facts", action="store_true", help="print this node's facts as JSON (what --nodes asks each node)"
    )
    p.add_argument(
        "--node-timeout",
        metavar="SECONDS",
        type=flags.ranged(float, 1, 3600, "seconds a node has to answer"),
        help="with --nodes: seconds each node has to answer (default: the inventory's, 60)",
    )
    p.set_defaults(func=run)


ARGUMENTS = {"doctor": doctor_arguments}
