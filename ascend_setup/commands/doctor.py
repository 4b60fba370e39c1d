"""`ascend-setup doctor`: host checks with fixes."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Type

from pydantic import BaseModel, ConfigDict

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.documents import Document
from ascend_setup.cli.render import Output, print_items, print_table, stderr_console, terminal_safe
from ascend_setup.doctor.report import DoctorRequest, doctor_report, target_line
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.fleet.target import FleetTarget
from ascend_setup.host.doctor_checks import DoctorReport
from ascend_setup.index.pipconfig import PipSettings, network_settings_for_this_run, pip_settings
from ascend_setup.index.urls import index_overrides
from ascend_setup.matrix import load_matrix
from ascend_setup.nodes.inventory import load_inventory
from ascend_setup.nodes.multinode import Preflight, run_preflight
from ascend_setup.nodes.node_facts import NodeFacts, gather
from ascend_setup.steps.options import which_index
from ascend_setup.utils.paths import CANN_HOME, PYTHON, VENV, check_dir_path, resolve_workdir, root_dir

if TYPE_CHECKING:
    from rich.console import Console


class DoctorOptions(Options):
    cann: Optional[str] = None
    cann_home: Optional[str] = None
    workdir: Optional[str] = None
    venv: Optional[str] = None
    python: Optional[str] = None
    soc: Optional[str] = None
    vllm_ascend: Optional[str] = None
    root: Optional[str] = None
    index_url: Optional[str] = None
    index: Optional[List[str]] = None
    respect_pip_config: bool = False
    nodes: Optional[str] = None
    node_facts: bool = False
    node_timeout: Optional[float] = None


class CheckResult(BaseModel):
    """One check: `fix` says what to do when it did not pass."""

    model_config = ConfigDict(extra="forbid")

    id: str
    status: Literal["pass", "warn", "fail"]
    detail: str
    fix: Optional[str] = None


class DoctorDocument(Document):
    """`doctor --json`: every check, the facts they read (the host, its CANN, NPUs, interpreters, indexes and
    the install `target`), and `ok` false (exit 1) when a check failed."""

    checks: List[CheckResult]
    facts: Dict[str, Any]
    ok: bool


class NodeFactsDocument(NodeFacts):
    """`doctor --node-facts`: this node's facts, what `doctor --nodes` asks each node (always JSON)."""

    model_config = ConfigDict(extra="forbid")


class NodeAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    answered: bool
    error: Optional[str] = None
    facts: Optional[NodeFacts] = None


class NodeProblem(BaseModel):
    """A problem of one node (`node`), or across the nodes (null); `prevents` names the triage signatures."""

    model_config = ConfigDict(extra="forbid")

    check: str
    message: str
    fix: str
    node: Optional[str] = None
    severity: Literal["fail", "warn"] = "fail"
    prevents: List[str] = []


class NpuPing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    npu: int
    target: str
    address: str
    ok: bool
    detail: str


class PreflightDocument(Document):
    """`doctor --nodes FILE --json`: each node's answer, the problems with their fixes, the NPU pings, and each
    node's serving environment (`env`); `ok` false (exit 1) when a problem fails."""

    ok: bool
    seconds: float
    nodes: List[NodeAnswer]
    problems: List[NodeProblem]
    pings: List[NpuPing]
    env: Dict[str, List[str]]
    note: Optional[str] = None


DOCUMENTS: Dict[str, Type[BaseModel]] = {
    "doctor": DoctorDocument,
    "doctor --nodes": PreflightDocument,
    "doctor --node-facts": NodeFactsDocument,
}


def run(options: DoctorOptions, output: Output) -> Result:
    if options.node_facts:  # one node's facts, for a controller's `doctor --nodes` (always JSON)
        cann_home, _ = CANN_HOME.value(options.cann_home)
        facts = gather(cann_home=cann_home, matrix_file=str(options.matrix) if options.matrix else None).model_dump()
        output.print_json(facts)
        return Result(0, NodeFactsDocument.model_validate(facts))
    if options.nodes:
        return run_nodes(options.nodes, options.node_timeout)
    report, target = doctor_report(
        request_of(options), show=lambda line: stderr_console().print(line, soft_wrap=True, markup=False)
    )
    return Result(
        1 if report.failed else 0,
        DoctorDocument.model_validate(report.to_json()),
        lambda console: render(console, report, target),
    )


def request_of(options: DoctorOptions) -> DoctorRequest:
    """The flags, each checked, in the order a bad one is reported."""
    workdir = resolve_workdir(options.workdir, mode="read")  # doctor only reads: a missing one is no problem
    root = root_dir(options.root)
    venv, venv_source = VENV.path(options.venv)
    venv = venv or Workdir(workdir).venv
    check_dir_path(venv, venv_source, mode="read")
    matrix = load_matrix(options.matrix).with_indexes(index_overrides(options.index))
    try:
        settings: Optional[PipSettings] = network_settings_for_this_run(
            pip_settings(respect=options.respect_pip_config)
        )
    except AscendSetupError:
        settings = None
    cann_home, home_source = CANN_HOME.value(options.cann_home)
    if cann_home and not Path(cann_home).is_dir():
        raise BadInput(f"{home_source} {cann_home} is not a directory")
    python, python_source = PYTHON.value(options.python)
    soc = options.soc  # checked as it was parsed
    index = which_index(options.index_url, None, lambda: settings.index if settings else "")
    return DoctorRequest(
        workdir=workdir,
        root=root,
        venv=venv,
        matrix=matrix,
        settings=settings,
        cann_home=cann_home,
        python=python,
        python_source=python_source,
        soc=soc,
        index=index,
        cann=options.cann,
        vllm_ascend=options.vllm_ascend,
    )


def render(console: Console, report: DoctorReport, target: FleetTarget) -> None:
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


def run_nodes(nodes: str, timeout: Optional[float]) -> Result:
    inventory = load_inventory(nodes)
    if timeout is not None:
        inventory = dataclasses.replace(inventory, timeout=timeout)
    result = run_preflight(inventory)
    return Result(
        1 if result.failed else 0,
        PreflightDocument.model_validate(result.to_json()),
        lambda console: render_preflight(console, result),
    )


def node_rows(result: Preflight) -> List[List[str]]:
    """One line per node: its host, versions and how many of its NPUs' links are up."""
    rows = []
    for v in result.views:
        f = v.facts
        if f is None:
            rows.append([v.name, "no answer", "", "", "", ""])
            continue
        up = sum(n.link == "UP" for n in f.npus)
        rows.append([v.name, f.hostname, f.cann or "-", f.driver or "-", f.row or "-", f"{up}/{len(f.npus)} up"])
    return rows


def render_npus(console: Console, result: Preflight) -> None:
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


def render_env(console: Console, result: Preflight) -> None:
    for name, lines in result.env.items():
        console.print(
            terminal_safe(f"# {name}: the environment to serve across nodes (vllm-ascend 0.23)"),
            soft_wrap=True,
            markup=False,
        )
        for line in lines:
            console.print(terminal_safe(line), soft_wrap=True, markup=False)


def render_preflight(console: Console, result: Preflight) -> None:
    """A table of the nodes, one of each node's NPUs, every problem with its fix, then each node's block."""
    print_table(
        console,
        f"{len(result.views)} nodes ({result.seconds:.1f} s)",
        ["node", "host", "CANN", "driver", "row", "NPUs"],
        node_rows(result),
    )
    render_npus(console, result)
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
    render_env(console, result)
    fails = sum(p.severity == "fail" for p in result.problems)
    console.print(f"[red]{fails} problem(s) across the nodes[/red]" if fails else "[green]no node problem[/green]")


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
    p.set_defaults(func=run, options=DoctorOptions)


ARGUMENTS = {"doctor": doctor_arguments}
