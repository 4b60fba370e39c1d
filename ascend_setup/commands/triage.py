"""`ascend-setup triage FILE|-`: the root cause of any log (a step log, a manual pip install, a vllm serve crash)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, stdout_console
from ascend_setup.errors import EXIT_FINDINGS, EXIT_OK, BadInput
from ascend_setup.knowledge.scan import Diagnosis, triage_stream
from ascend_setup.utils.inputs import open_input


def read_diagnosis(source: str) -> Optional[Diagnosis]:
    """Triage the file at `source` ('-' for standard input). A missing, unreadable, non-regular (a FIFO would
    block) or binary file is bad input."""
    if source == "-":
        return triage_stream(sys.stdin.buffer)
    try:
        with open_input(
            Path(source).expanduser(), "log", what=f"FILE {source}", hint="give a log file, or - for standard input"
        ) as stream:
            return triage_stream(stream)
    except BadInput as exc:
        raise BadInput(
            exc.message if exc.message.startswith("FILE ") else f"FILE {source}: {exc.message}", hint=exc.hint
        ) from None


def run(args: argparse.Namespace, output: Output) -> int:
    diagnosis = read_diagnosis(args.file)
    found = diagnosis is not None and diagnosis.id is not None
    if args.json:
        output.print_json(
            diagnosis.to_json()
            if diagnosis
            else {
                "id": None,
                "line_number": None,
                "line": None,
                "cause": None,
                "fix": None,
                "context": [],
                "evidence": [],
                "processes": 0,
                "reported_by": [],
                "codes": [],
                "unknown_codes": [],
            }
        )
        return EXIT_OK if found else EXIT_FINDINGS
    console = stdout_console()
    if diagnosis is None:
        console.print("no known cause, and no error-shaped line in this log", markup=False)
        return EXIT_FINDINGS
    if found:
        console.print(f"cause ({diagnosis.id}): {diagnosis.cause}", soft_wrap=True, markup=False)
        console.print(f"fix: {diagnosis.fix}", soft_wrap=True, markup=False)
        for number, line in diagnosis.evidence:
            console.print(f"evidence (line {number}): {line}", soft_wrap=True, markup=False)
        if diagnosis.processes > 1:
            who = ", ".join(p or "(unprefixed)" for p in diagnosis.reported_by)
            console.print(f"reported by {diagnosis.processes} processes: {who}", soft_wrap=True, markup=False)
    else:
        console.print("no known cause; the most error-like line is:", markup=False)
    console.print(f"line {diagnosis.line_number}:", markup=False)
    for line in diagnosis.context:
        console.print(f"  {'>' if line == diagnosis.line else ' '} {line}", soft_wrap=True, markup=False)
    for line in diagnosis.code_lines():
        console.print(line, soft_wrap=True, markup=False)
    return EXIT_OK if found else EXIT_FINDINGS


def triage_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    p.add_argument("file", metavar="FILE", help="the log to read, or - for standard input")
    p.set_defaults(func=run)


ARGUMENTS = {"triage": triage_arguments}
