"""`ascend-setup mirrors`: rank indexes (freshness, then throughput); optionally apply the choice."""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Optional

from ascend_setup import STARTED
from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_table, stderr_console, stdout_console
from ascend_setup.cli.values import check_index_url
from ascend_setup.dists.venv_reader import read_pyvenv_cfg
from ascend_setup.errors import BadInput, named_by
from ascend_setup.host.cann import primary_cann, row_for
from ascend_setup.host.interpreters import PREFERRED
from ascend_setup.host.machine import this_machine
from ascend_setup.index.http import TLS_HINT, UNTRUSTED
from ascend_setup.index.pipconfig import trust_for_this_run
from ascend_setup.index.urls import index_overrides
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.models import Row
from ascend_setup.mirrors.apply import write_user_config, write_venv_config
from ascend_setup.mirrors.choice import candidates, ranked
from ascend_setup.resolve.pythons import explicit_python
from ascend_setup.utils.paths import CANN_HOME, PYTHON, resolve_workdir

#: Seconds of --budget kept for rendering, the cache file and the interpreter's exit.
EXIT_RESERVE = 0.15
RANKING_SHARE_MIN = 0.5


def sample_python(value: Optional[str], row: Row) -> str:
    """The Python X.Y whose files measure the mirrors: --python (a version or an interpreter), else this one
    when the row takes it, else the version the hints suggest. Not the install's choice (decide_python): any file
    of the row measures a mirror as well, and that choice searches the host's interpreters (a probe each: 6 s on a
    loaded host, more than the default --budget) and asks the indexes first."""
    if value:
        return explicit_python(value, row)
    here = "%d.%d" % sys.version_info[:2]
    return here if row.python_allows(here + ".0") else PREFERRED


def run(args: argparse.Namespace, output: Output) -> int:
    if args.apply and not args.venv and not args.global_:
        raise BadInput("--apply needs --venv DIR (or --global to change your user pip config)")
    if args.global_ and not args.apply:
        raise BadInput("--global does nothing without --apply", hint="add --apply to write your user pip config")
    if args.global_ and args.venv:
        raise BadInput(
            "--global and --venv name two different pip configurations: give one of them",
            hint="--venv DIR writes that venv's pip.conf/uv.toml; --global your user pip config",
        )
    if args.venv and not args.apply:
        raise BadInput("--venv does nothing without --apply", hint="add --apply to write that venv's pip.conf")
    venv = Path(args.venv).expanduser() if args.venv else None  # as every path flag: `--venv=~/v` too
    if venv and read_pyvenv_cfg(venv) is None:
        raise BadInput(f"--venv {args.venv} is not a venv (no pyvenv.cfg)")
    if args.only and not args.candidate:
        raise BadInput("--only ranks just the --candidate URLs: give at least one")
    matrix = load_matrix(args.matrix).with_indexes(index_overrides(args.index))
    row = row_for(matrix, args.cann, primary_cann(CANN_HOME.value(None)[0])).for_arch(platform.machine())
    extra = [check_index_url(u, "--candidate") for u in args.candidate or []]
    trust_for_this_run()
    urls = candidates(matrix, extra, args.only)
    workdir = resolve_workdir(args.workdir, mode="read")  # the cache is kept when it can be
    given, given_as = PYTHON.value(args.python)
    with named_by(given_as):
        python = sample_python(given, row)
    live = stderr_console()
    shown = (
        (lambda m: live.print(f"  {m.status:<7} {m.url} {m.detail}".rstrip(), markup=False, soft_wrap=True))
        if live.is_terminal and not args.json
        else None
    )
    # --budget is the command's wall time: its start-up (imports, the interpreter search) comes off the ranking's
    # share, and a little is kept for writing the answer and exiting.
    target = this_machine(python)  # before the budget is reckoned: it reads this host's glibc
    # Half of it is the ranking's at least: a start-up slowed by a loaded host must not leave it too little
    # time to hear a good index (that overruns --budget, and is rarer than a dropped index is harmful).
    budget = max(args.budget * RANKING_SHARE_MIN, args.budget - (time.monotonic() - STARTED) - EXIT_RESERVE)
    data, _ = ranked(
        matrix,
        row,
        workdir,
        target=target,
        urls=urls,
        budget=budget,
        use_cache=False,
        first=None if args.only else urls[0],
        on_result=shown,
    )
    result = data["result"]
    if args.apply and result["chosen"]:
        if venv:
            try:
                write_venv_config(venv, result["chosen"], None)  # its extra indexes stay
            except OSError as exc:
                raise BadInput(f"--venv {args.venv}: its pip.conf cannot be written ({exc.strerror or exc})") from None
        if args.global_:
            write_user_config(result["chosen"])
    # A mirror refused for its certificate is fixed by trusting its CA (a proxy's, or a site's), as in every command.
    untrusted = any(UNTRUSTED in (m["detail"] or "") for m in result["mirrors"])
    if args.json:
        output.print_json(
            {
                "mirrors": result["mirrors"],
                "chosen": result["chosen"],
                "row": row.cann,
                "sample": result["sample"],
                "seconds": result["seconds"],
                **({"hint": TLS_HINT} if untrusted else {}),
            }
        )
    else:
        console = stdout_console()
        sample = result['sample'] or "none: no fresh index answered"
        print_table(
            console,
            f"mirrors for CANN {row.cann} (sample file {sample}, {result['seconds']:.1f} s)",
            ["status", "mirror", "TTFB", "throughput", "detail"],
            [
                [
                    m["status"],
                    m["url"],
                    "" if m["ttfb_s"] is None else f"{m['ttfb_s'] * 1000:.0f} ms",
                    "" if not m["throughput_bps"] else f"{m['throughput_bps'] / 1e6:.2f} MB/s",
                    m["detail"],
                ]
                for m in result["mirrors"]
            ],
            status_column=0,
        )
        console.print(
            f"chosen: {result['chosen'] or 'none usable'}"
            + (f" (written to {args.venv}/pip.conf and uv.toml)" if args.apply and args.venv else "")
        )
        if untrusted:
            stderr_console().print(f"hint: {TLS_HINT}", markup=False, soft_wrap=True)
    return 0 if result["chosen"] else 1


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
    p.set_defaults(func=run)


ARGUMENTS = {"mirrors": mirrors_arguments}
