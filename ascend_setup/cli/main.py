"""The front door: parse, call one command, map errors to exit codes. No logic lives here.

Each command module adds its own options (its `ARGUMENTS`), next to its code. A run imports only the module
of the command it runs, so start-up stays fast; the top-level --help reads the table below and imports none.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import Callable, Dict, List, NoReturn, Optional, Tuple

from ascend_setup import __version__
from ascend_setup.cli.render import Output, terminal_safe
from ascend_setup.cli.subcommands import in_order
from ascend_setup.errors import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_LOCKED, AscendSetupError, BadInput
from ascend_setup.utils import tempdirs
from ascend_setup.utils.interrupts import at_interrupt, install_handlers
from ascend_setup.utils.procstat import process_start
from ascend_setup.utils.redact import redact
from ascend_setup.utils.run_context import command_run

#: A command module's `ARGUMENTS`: for each command it owns, the function that adds its options (and sets
#: `func`, which takes the parsed arguments and the run's Output, and returns the exit code).
Arguments = Dict[str, Callable[[argparse.ArgumentParser], None]]

#: Every command: the module under commands/ that owns it, and its one line for the top-level --help.
COMMANDS: Dict[str, Tuple[str, str]] = {
    "install": ("install", "run (or resume) the install pipeline"),
    "resume": ("install", "resume the last install with its options"),
    "status": ("install", "each step: done/running/interrupted/failed/pending, times, log"),
    "plan": ("plan", "forecast wheel / source build / unavailable for a target"),
    "bundle": (
        "bundle",
        "every file an offline install of a target needs, in one directory or tar (made on any "
        "connected machine); 'bundle verify PATH' checks one",
    ),
    "audit": ("audit", "read-only check of a venv against a row"),
    "mirrors": ("mirrors", "rank package indexes: freshness, then throughput"),
    "doctor": ("doctor", "host checks with fixes"),
    "container": (
        "container",
        "'container run-command': the docker run this host needs for vLLM-Ascend "
        "(its cards, its driver's files, its card's image), printed, not run",
    ),
    "demo": (
        "demo",
        "the whole main job on any machine, against a simulated Ascend host (loopback indexes, a "
        "fake CANN); stopped partway and resumed, then audited",
    ),
    "fit": (
        "fit",
        "will MODEL fit a card, and how fast will it decode (reads config.json and safetensors headers only)",
    ),
    "model": ("model", "models on a hub: fetch one to persistent disk, resumably"),
    "probe": (
        "fit",
        "measure HBM copy bandwidth in the installed venv (2 GiB fp16, 3 warm-up + 20 timed "
        "copies); fit uses the result",
    ),
    "serve": (
        "serve",
        "compose, validate, start, smoke-test and measure 'vllm serve' for MODEL; 'serve status', 'serve stop [NAME]'",
    ),
    "bench": (
        "bench",
        "sweep a running server (one serve started, or any OpenAI-compatible URL) over "
        "concurrency: TTFT, TPOT, ITL, E2EL and throughput per level",
    ),
    "matrix": ("matrix", "the compatibility matrix"),
    "fleet": ("fleet", "many hosts: the report of the Ansible audit play (ansible/audit.yml)"),
    "triage": (
        "triage",
        "the root cause of a log (a step log, a pip install, a vllm serve crash) and its fix; "
        "exit 0 found, 1 none known, 2 bad input",
    ),
}

#: Commands a stop interrupts in the middle of work that the next run picks up.
RESUMABLE = ("install", "resume")

EPILOG = (
    f"exit codes: 0 success; {EXIT_FINDINGS} findings or a failed step; {EXIT_BAD_INPUT} bad input (one "
    f"line on stderr; JSON on stdout under --json); {EXIT_LOCKED} another run holds the workdir; 130, 143, "
    "129 stopped by SIGINT, SIGTERM, SIGHUP. 'ascend-setup COMMAND --help' for a command's options. The "
    "manual: docs/ in the source (README.md links into it; 'mkdocs serve' shows it as a site)."
)


class OneLineParser(argparse.ArgumentParser):
    """Bad flags are bad input: one line on stderr and exit 2 (JSON under --json), not a usage dump."""

    def error(self, message: str) -> NoReturn:
        raise BadInput(message, hint=f"see {self.prog} --help")


def command_of(argv: List[str]) -> Optional[str]:
    """The command a command line names: its first word, when that is one (top-level flags come alone)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def build_parser(argv: Optional[List[str]] = None, *, full: bool = False) -> argparse.ArgumentParser:
    """The parser. Only the command `argv` names gets its options (its module imported); `full` gives every
    command its options, for the manual's reference and the tests that walk every flag."""
    parser = OneLineParser(
        prog="ascend-setup",
        description="Take an Ascend host to a working vLLM-Ascend "
        "environment, resumably; audit one someone else built.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"ascend-setup {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = command_of(argv or [])
    for name, (module, help) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        if full or name == wanted:
            arguments: Arguments = importlib.import_module(f"ascend_setup.commands.{module}").ARGUMENTS
            arguments[name](p)
    return parser


def positionals(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Dict[str, str]:
    """dest -> metavar of each positional argument along the sub-commands the command line chose: how the
    user's help names it (MODEL, FILE, NAME)."""
    found: Dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if isinstance(chosen, str) and dict.__contains__(action.choices, chosen):
                found.update(positionals(action.choices[chosen], args))
        elif not action.option_strings and action.dest != argparse.SUPPRESS:
            found[action.dest] = str(action.metavar or action.dest.upper())
    return found


def refuse_empty_values(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """`--workdir ''`, `serve ''` and the like: an empty value is never what the user meant."""
    named = positionals(parser, args)
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            flag = named.get(name) or "--" + name.rstrip("_").replace("_", "-")
            raise BadInput(f"{flag} was given an empty value", hint="see ascend-setup --help")


def fail(out: Output, exc: AscendSetupError) -> int:
    """An error the user reads: its details, then one line on stderr; under --json, the error document."""
    if exc.details:
        sys.stderr.write(redact(exc.details.rstrip()) + "\n")
    sys.stderr.write(terminal_safe(redact(exc.one_line())) + "\n")
    out.error(exc.message, exc.hint, exc.exit_code)
    return exc.exit_code


def defect(exc: BaseException) -> AscendSetupError:
    """An exception no layer expected is a defect of the tool: still one line (and one JSON document), with
    the traceback on request rather than over the user's screen."""
    if os.environ.get("ASCEND_SETUP_DEBUG"):
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        hint = "a defect of ascend-setup: please report it with the traceback above"
    else:
        hint = "a defect of ascend-setup: run again with ASCEND_SETUP_DEBUG=1 for the traceback, and report it"
    return AscendSetupError(f"internal error: {type(exc).__name__}: {exc}", hint=hint)


def passed_through(argv: List[str]) -> Tuple[List[str], Optional[List[str]]]:
    """What follows `--` is passed on (`serve MODEL -- ARGS`: vllm serve's), not ours: cut before parsing
    (argparse's own `--` handling differs across nested sub-commands and Python versions)."""
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def pass_on(args: argparse.Namespace, theirs: List[str]) -> None:
    """Give what followed `--` to the option the command declares for it (`after_dashes`); a command that
    declares none takes nothing after `--`."""
    dest = getattr(args, "after_dashes", None)
    if dest is None:
        raise BadInput("only 'serve MODEL' takes arguments after -- (vllm serve's)", hint="see ascend-setup --help")
    setattr(args, dest, [*getattr(args, dest), *theirs])


def run_command(args: argparse.Namespace, out: Output) -> int:
    """Build the command's options from the parsed line, once; run it; print its result."""
    from ascend_setup.cli.command import emit

    return emit(args.func(args.options.from_namespace(args), out), out)


def main(argv: Optional[List[str]] = None) -> int:
    with command_run(process_start()) as run:
        code = run_front_door(sys.argv[1:] if argv is None else list(argv))
        if code != EXIT_BAD_INPUT:  # a command refused as bad input touches nothing
            run.end()
    return code


def run_front_door(argv: List[str]) -> int:
    """Parse, run one command, print its result or its error: the exit code."""
    ours, theirs = passed_through(argv)
    out = Output("--json" in ours)  # before parsing: a flag the parser refuses is answered in JSON too
    try:
        parser = build_parser(ours)
        args = parser.parse_args(in_order(parser, ours))
        refuse_empty_values(args, parser)
        if theirs is not None:
            pass_on(args, theirs)
    except AscendSetupError as exc:
        return fail(out, exc)
    install_handlers(
        "run the same command again to resume" if args.command in RESUMABLE else None,
        on_interrupt=lambda message, code: out.error(message, None, code),
    )
    at_interrupt(tempdirs.leave)
    try:
        tempdirs.enter()
        return run_command(args, out)
    except AscendSetupError as exc:
        return fail(out, exc)
    except Exception as exc:  # the last line of defence of the one-line, one-document promise
        return fail(out, defect(exc))
    finally:
        tempdirs.leave()


if __name__ == "__main__":
    raise SystemExit(main())
