"""`ascend-setup mirrors`: rank indexes (freshness, then throughput); optionally apply the choice."""

from __future__ import annotations

import argparse
import platform
from typing import TYPE_CHECKING, Callable, Dict, List, Literal, Optional, Type

from pydantic import BaseModel, ConfigDict

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.documents import Document
from ascend_setup.cli.render import Output, print_table, stderr_console
from ascend_setup.cli.values import check_index_url
from ascend_setup.errors import named_by
from ascend_setup.utils.paths import CANN_HOME, PYTHON, resolve_workdir

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.mirrors.rank import MirrorResult


class MirrorsOptions(Options):
    cann: Optional[str] = None
    candidate: Optional[List[str]] = None
    only: bool = False
    budget: float = 5.0
    apply: bool = False
    venv: Optional[str] = None
    global_: bool = False
    workdir: Optional[str] = None
    python: Optional[str] = None
    index: Optional[List[str]] = None
    respect_pip_config: bool = False


class RankedMirror(BaseModel):
    """One index as the ranking measured it: `slow` answers, below a quarter of the best throughput."""

    model_config = ConfigDict(extra="forbid")

    url: str
    status: Literal["ok", "stale", "error", "timeout", "slow"]
    ttfb_s: Optional[float] = None
    throughput_bps: Optional[float] = None
    detail: str = ""


class MirrorsDocument(Document):
    """`mirrors --json`: every index ranked, the one chosen (null: none usable), the row whose pins gate
    freshness, the file measured; `hint` only when an index was refused for its certificate."""

    mirrors: List[RankedMirror]
    chosen: Optional[str]
    row: str
    sample: Optional[str]
    seconds: float
    hint: Optional[str] = None

    ABSENT_WHEN_NONE = frozenset({"hint"})


DOCUMENTS: Dict[str, Type[BaseModel]] = {"mirrors": MirrorsDocument}


def live_lines(json_output: bool) -> Optional[Callable[[MirrorResult], None]]:
    """Each index's result on stderr as it comes, when a person watches (a terminal, no --json)."""
    live = stderr_console()
    if not live.is_terminal or json_output:
        return None
    return lambda m: live.print(f"  {m.status:<7} {m.url} {m.detail}".rstrip(), markup=False, soft_wrap=True)


def run(options: MirrorsOptions, output: Output) -> Result:
    from ascend_setup.host.cann import primary_cann, row_for
    from ascend_setup.host.machine import this_machine
    from ascend_setup.index.http import TLS_HINT, UNTRUSTED
    from ascend_setup.index.pipconfig import trust_for_this_run
    from ascend_setup.index.urls import index_overrides
    from ascend_setup.matrix import load_matrix
    from ascend_setup.mirrors.budget import ranking_budget
    from ascend_setup.mirrors.choice import candidates, ranked
    from ascend_setup.mirrors.ranking_request import apply_choice, checked_flags, sample_python

    venv = checked_flags(
        apply=options.apply,
        venv=options.venv,
        user=options.global_,
        only=options.only,
        candidates=options.candidate or [],
    )
    matrix = load_matrix(options.matrix).with_indexes(index_overrides(options.index))
    row = row_for(matrix, options.cann, primary_cann(CANN_HOME.value(None)[0])).for_arch(platform.machine())
    extra = [check_index_url(u, "--candidate") for u in options.candidate or []]
    trust_for_this_run()
    urls = candidates(matrix, extra, options.only)
    workdir = resolve_workdir(options.workdir, mode="read")  # the cache is kept when it can be
    given, given_as = PYTHON.value(options.python)
    with named_by(given_as):
        python = sample_python(given, row)
    target = this_machine(python)  # before the budget is reckoned: it reads this host's glibc
    data, _ = ranked(
        matrix,
        row,
        workdir,
        target=target,
        urls=urls,
        budget=ranking_budget(options.budget),
        use_cache=False,
        first=None if options.only else urls[0],
        on_result=live_lines(options.json_output),
    )
    result = data["result"]
    if options.apply and result["chosen"]:
        apply_choice(result["chosen"], venv, options.venv, options.global_)
    # A mirror refused for its certificate is fixed by trusting its CA (a proxy's, or a site's), as in every command.
    untrusted = any(UNTRUSTED in (m["detail"] or "") for m in result["mirrors"])
    document = MirrorsDocument.model_validate({**result, "row": row.cann, "hint": TLS_HINT if untrusted else None})
    written = f" (written to {options.venv}/pip.conf and uv.toml)" if options.apply and options.venv else ""
    return Result(0 if document.chosen else 1, document, lambda console: render(console, document, written))


def render(console: Console, document: MirrorsDocument, written: str) -> None:
    sample = document.sample or "none: no fresh index answered"
    print_table(
        console,
        f"mirrors for CANN {document.row} (sample file {sample}, {document.seconds:.1f} s)",
        ["status", "mirror", "TTFB", "throughput", "detail"],
        [
            [
                m.status,
                m.url,
                "" if m.ttfb_s is None else f"{m.ttfb_s * 1000:.0f} ms",
                "" if not m.throughput_bps else f"{m.throughput_bps / 1e6:.2f} MB/s",
                m.detail,
            ]
            for m in document.mirrors
        ],
        status_column=0,
    )
    console.print(f"chosen: {document.chosen or 'none usable'}{written}")
    if document.hint:
        stderr_console().print(f"hint: {document.hint}", markup=False, soft_wrap=True)


def mirrors_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.cann(p, "row whose pins gate freshness (default: the installed CANN's, else the newest)")
    p.add_argument("--candidate", metavar="URL", action="append", help="another index to rank (repeatable)")
    p.add_argument("--only", action="store_true", help="rank just the --candidate URLs")
    p.add_argument(
        "--budget",
        type=flags.ranged(float, 0.5, 120, "a time budget in seconds"),
        default=5.0,
        metavar="SECONDS",
        help="overall time budget (default 5)",
    )
    p.add_argument("--apply", action="store_true", help="write the choice into --venv (or --global)")
    flags.venv(p, "the venv whose pip.conf/uv.toml --apply writes", env=False)
    p.add_argument("--global", dest="global_", action="store_true", help="with --apply: your user pip config")
    flags.workdir(p, "where the ranking is cached for install")
    flags.python(
        p,
        "the Python the install will use: the sample is the row's largest wheel for it (default: this "
        "interpreter when the row takes it, else 3.11)",
        metavar="X.Y|EXE",
    )
    flags.index_overrides(p)
    p.set_defaults(func=run, options=MirrorsOptions)


ARGUMENTS = {"mirrors": mirrors_arguments}
