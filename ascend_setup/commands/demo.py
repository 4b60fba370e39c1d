"""`ascend-setup demo`: the whole main job against a simulated Ascend host, on any machine."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Type

from pydantic import BaseModel, ConfigDict

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.documents import Document
from ascend_setup.cli.render import Output, stderr_console

if TYPE_CHECKING:
    from rich.console import Console


class DemoOptions(Options):
    workdir: Optional[str] = None
    keep: bool = False
    interrupt_at: str = "download"
    installer: Literal["pip", "uv"] = "uv"


class DemoAudit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: bool
    errors: int
    findings: int
    summary: str


class DemoDocument(Document):
    """`demo --json`: the simulated install's steps, where it was stopped and resumed (`resumed`: null when
    not), the audit of its venv (`ok` false: exit 1), the serve and bench ending, and the whole run's seconds."""

    simulated: bool
    workdir: str
    installer: Literal["pip", "uv"]
    python: str
    interrupted_at: Optional[str]
    resumed: Optional[Dict[str, Any]]
    steps: List[Dict[str, Any]]
    audit: DemoAudit
    shell: List[str]
    hints: List[str]
    serve: Dict[str, Any]
    native: str
    seconds: float
    workdir_kept: bool


DOCUMENTS: Dict[str, Type[BaseModel]] = {"demo": DemoDocument}


def run(options: DemoOptions, output: Output) -> Result:
    from ascend_setup.simulate.demo_run import check_interrupt_at, demo_in, demo_workdir

    check_interrupt_at(options.interrupt_at)
    console = stderr_console()
    with ExitStack() as stack:
        workdir, ours = demo_workdir(options.workdir, options.keep, stack)
        summary = demo_in(
            workdir,
            ours,
            interrupt_at=options.interrupt_at,
            installer=options.installer,
            show=lambda line: console.print(line, soft_wrap=True, markup=False, highlight=False),
            logged=options.json_output,
        )
    document = DemoDocument.model_validate(summary)
    return Result(0 if document.audit.ok else 1, document, lambda out: render(out, summary, workdir, ours))


def render(out: Console, summary: Dict[str, Any], workdir: Path, ours: bool) -> None:
    from ascend_setup.simulate.story import LABEL

    out.print(
        f"{LABEL} the main job, end to end, against a simulated Atlas A2 host (no NPU, no real CANN):",
        soft_wrap=True,
        markup=False,
    )
    for step in summary["steps"]:
        seconds = "" if step["seconds"] is None else f"{step['seconds']:6.1f} s"
        out.print(f"  {step['state']:<6} {step['name']:<17} {seconds}", markup=False)
    render_resumed(out, summary["resumed"])
    out.print(f"audit: {summary['audit']['summary']}", markup=False)
    out.print(f"native libraries: {summary['native']}", soft_wrap=True, markup=False)
    out.print("serving hints for this row:")
    for hint in summary["hints"]:
        out.print(f"  - {hint}", soft_wrap=True, markup=False)
    render_serve(out, summary["serve"])
    if not ours:  # only what still exists is pointed at
        out.print(f"the simulated install is kept in {workdir}; to use its venv:", soft_wrap=True, markup=False)
        for line in summary["shell"]:
            out.print(f"  {line}", soft_wrap=True, markup=False)
        out.print(
            f"  ascend-setup probe --device cpu --gib 0.1 --venv {workdir / 'install' / 'venv'}",
            soft_wrap=True,
            markup=False,
        )
    where = f"kept in {workdir}" if not ours else "removed"
    out.print(
        f"{LABEL} {summary['seconds']:.0f} s; the demo's workdir was {where}. On an Ascend host: "
        "ascend-setup install --cann 9.1.0",
        soft_wrap=True,
        markup=False,
    )


def render_resumed(out: Console, resumed: Optional[Dict[str, Any]]) -> None:
    if not resumed:
        return
    continued = f", and the rerun asked for {resumed['continued_with']}" if resumed.get("continued_with") else ""
    kept = f" ({resumed['kept_bytes'] / 1e6:.1f} MB of the sdist on disk{continued})" if resumed["kept_bytes"] else ""
    out.print(
        f"resumed: SIGKILL during step {resumed['step']}{kept}; 'ascend-setup resume' took it from there",
        soft_wrap=True,
        markup=False,
    )


def render_serve(out: Console, served: Dict[str, Any]) -> None:
    from ascend_setup.simulate.story import LABEL

    out.print(
        f"{LABEL} serve {served['model']}: ready in {served['ready_seconds']:.1f} s; smoke answer "
        f"{served['answer']!r}; TTFT {served['ttft_s'] * 1000:.0f} ms on a fresh prefix, TPOT "
        f"{served['tpot_ms']:.1f} ms (p90 {served['tpot_p90_ms']:.1f}), decode {served['tok_s']:.1f} tok/s "
        f"(fit predicted {served['predicted_tok_s']:.1f}, ratio {served['ratio']:.2f})",
        soft_wrap=True,
        markup=False,
    )
    swept = served["bench"]
    levels = swept["levels"]
    out.print(
        f"{LABEL} bench {served['model']} at concurrency {', '.join(str(lv['concurrency']) for lv in levels)}: "
        f"{' / '.join(format(lv['output_tok_s'], '.0f') for lv in levels)} tok/s, TPOT "
        f"{' / '.join(format(lv['tpot_ms'], '.1f') for lv in levels)} ms ({swept['client']}); the sweep took "
        f"{swept['seconds']:.1f} s; stopped with 'serve stop' ({served['seconds']:.0f} s in all)",
        soft_wrap=True,
        markup=False,
    )


def demo_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.workdir(
        p, "a new or empty directory to run in, kept afterwards (default: a temporary one, removed)", env=False
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary workdir (its logs, venv and lock)")
    p.add_argument(
        "--interrupt-at",
        metavar="STEP",
        default="download",
        help="where to SIGKILL the install before resuming it: 'download' (the middle of the vllm-ascend "
        "sdist download, the default), a step name (not mirror or verify: over too soon), or 'none'",
    )
    flags.installer(p)
    p.set_defaults(func=run, options=DemoOptions)


ARGUMENTS = {"demo": demo_arguments}
