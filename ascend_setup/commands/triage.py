"""`ascend-setup triage FILE|-`: the root cause of any log (a step log, a manual pip install, a vllm serve crash)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Type

from pydantic import BaseModel, ConfigDict

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.render import Output
from ascend_setup.errors import EXIT_FINDINGS, EXIT_OK, BadInput

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.knowledge.scan import Diagnosis


def read_diagnosis(source: str) -> Optional[Diagnosis]:
    """Triage the file at `source` ('-' for standard input). A missing, unreadable, non-regular (a FIFO would
    block) or binary file is bad input."""
    from ascend_setup.knowledge.scan import triage_stream
    from ascend_setup.utils.inputs import open_input

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


class TriageOptions(Options):
    file: str


class EvidenceLine(BaseModel):
    line_number: int
    line: str


class CodeFound(BaseModel):
    """A code the log printed; the catalogue's fields when it knows the code."""

    model_config = ConfigDict(extra="forbid")

    code: str
    family: str
    line_number: int
    kind: Optional[str] = None
    meaning: Optional[str] = None
    cause: Optional[str] = None
    fix: Optional[str] = None
    source: Optional[str] = None


class TriageDocument(BaseModel):
    """`triage --json`: the cause (`id` null when no signature knows it) and the line it was read from (null
    when the log holds no error-shaped line at all)."""

    model_config = ConfigDict(extra="forbid")

    id: Optional[str] = None
    line_number: Optional[int] = None
    line: Optional[str] = None
    cause: Optional[str] = None
    fix: Optional[str] = None
    context: List[str] = []
    evidence: List[EvidenceLine] = []
    processes: int = 0
    reported_by: List[str] = []
    codes: List[CodeFound] = []
    unknown_codes: List[CodeFound] = []


DOCUMENTS: Dict[str, Type[BaseModel]] = {"triage": TriageDocument}


def run(options: TriageOptions, output: Output) -> Result:
    diagnosis = read_diagnosis(options.file)
    found = diagnosis is not None and diagnosis.id is not None
    return Result(
        EXIT_OK if found else EXIT_FINDINGS,
        TriageDocument.model_validate(diagnosis.to_json()) if diagnosis else TriageDocument(),
        lambda console: render(console, diagnosis),
    )


def render(console: Console, diagnosis: Optional[Diagnosis]) -> None:
    if diagnosis is None:
        console.print("no known cause, and no error-shaped line in this log", markup=False)
        return
    if diagnosis.id is not None:
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


def triage_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    p.add_argument("file", metavar="FILE", help="the log to read, or - for standard input")
    p.set_defaults(func=run, options=TriageOptions)


ARGUMENTS = {"triage": triage_arguments}
