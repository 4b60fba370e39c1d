"""`ascend-setup matrix list | show CANN | validate [FILE] | derive | check [FILE]`."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.documents import Document
from ascend_setup.cli.render import Output, print_table, stderr_console, stdout_console
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.index.urls import index_overrides
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.matrix.check import LiveCheck, RowCheck, check_rows, sdist_versions
from ascend_setup.matrix.models import Matrix, Row, RuntimeHint

if TYPE_CHECKING:
    from rich.console import Console


class MatrixOptions(Options):
    matrix_command: str


class ShowOptions(MatrixOptions):
    cann: str


class ValidateOptions(MatrixOptions):
    file: Optional[str] = None


class DeriveOptions(MatrixOptions):
    vllm_ascend: str
    cann: str
    index_url: Optional[str] = None
    index: Optional[List[str]] = None
    into: Optional[str] = None


class CheckOptions(MatrixOptions):
    file: Optional[str] = None
    live: bool = False
    pre: bool = False
    strict: bool = False
    sdist: Optional[List[str]] = None
    index_url: Optional[str] = None
    index: Optional[List[str]] = None


class ListedRow(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    cann: str
    python: str
    vllm_ascend: str = Field(alias="vllm-ascend")
    vllm: str
    torch: str
    torch_npu: str = Field(alias="torch-npu")


class ListDocument(Document):
    """`matrix list --json`: the matrix file read, and each row's main pins, newest first."""

    matrix: str
    rows: List[ListedRow]


class ArchPins(BaseModel):
    model_config = ConfigDict(extra="forbid")

    packages: Dict[str, str]
    package_index: Dict[str, str]


class ShowDocument(Document):
    """`matrix show CANN --json`: the whole row, every package's index resolved, and the matrix's indexes."""

    cann: str
    python: str
    packages: Dict[str, str]
    package_index: Dict[str, str]
    plugin_requirements: List[str]
    cuda_only: List[str]
    cann_python_deps: Dict[str, Optional[str]]
    runtime_hints: List[RuntimeHint]
    disk_gib: float
    wheel_glibc: Dict[str, Dict[str, str]]
    wheel_device: Optional[Dict[str, Dict[str, str]]] = None
    build_minutes: int
    arch: Dict[str, ArchPins]
    target_arch: Optional[str] = None
    indexes: Dict[str, str]

    ABSENT_WHEN_NONE = frozenset({"wheel_device", "target_arch"})


class ValidateDocument(Document):
    """`matrix validate --json`: an invalid file is bad input (exit 2, the error document)."""

    matrix: str
    valid: bool
    rows: List[str]


class DeriveDocument(Document):
    """`matrix derive --json`: the row as the metadata gives it, where each field came from, and what could not
    be read (`problems`: exit 1) or was decided where the metadata leaves it open (`notes`)."""

    cann: str
    row: Dict[str, Any]
    provenance: Dict[str, str]
    problems: List[str]
    notes: List[str]


class CheckDocument(Document):
    """`matrix check --json`: each row's findings by its CANN version; `ok` false is exit 1."""

    matrix: str
    live: bool
    pre: bool
    strict: bool
    rows: Dict[str, RowCheck]
    ok: bool


DOCUMENTS: Dict[str, Type[BaseModel]] = {
    "matrix list": ListDocument,
    "matrix show": ShowDocument,
    "matrix validate": ValidateDocument,
    "matrix derive": DeriveDocument,
    "matrix check": CheckDocument,
}

LISTED = ("vllm-ascend", "vllm", "torch", "torch-npu")


def run_list(options: MatrixOptions, output: Output) -> Result:
    matrix = load_matrix(options.matrix)
    rows = [matrix.rows[v] for v in matrix.versions()]
    document = ListDocument(
        matrix=matrix.source,
        rows=[
            ListedRow.model_validate({"cann": r.cann, "python": r.python, **{n: r.packages[n] for n in LISTED}})
            for r in rows
        ],
    )
    return Result(0, document, lambda console: render_list(console, matrix, rows))


def render_list(console: Console, matrix: Matrix, rows: List[Row]) -> None:
    print_table(
        console,
        f"Compatibility matrix ({matrix.source})",
        ["CANN", "Python", "vllm-ascend", "vllm", "torch", "torch-npu", "triton-ascend"],
        [[r.cann, r.python, *(r.packages[n] for n in (*LISTED, "triton-ascend"))] for r in rows],
    )


def run_show(options: ShowOptions, output: Output) -> Result:
    matrix = load_matrix(options.matrix)
    row = select_row(matrix, options.cann)
    document = ShowDocument.model_validate({**row.to_json(), "indexes": dict(matrix.indexes)})
    return Result(0, document, lambda console: render_show(console, row))


def render_show(console: Console, row: Row) -> None:
    print_table(
        console,
        f"CANN {row.cann}  (Python {row.python})",
        ["package", "version", "index"],
        [[n, v, row.index_of(n)] for n, v in row.packages.items()],
    )
    print_table(
        console,
        "CANN operator compiler's Python dependencies",
        ["package", "minimum"],
        [[n, m or "any"] for n, m in row.cann_python_deps.items()],
    )
    console.print("CUDA-only requirements of vllm that are stripped: " + ", ".join(row.cuda_only))
    for arch, variant in row.arch.items():
        print_table(
            console,
            f"on {arch}",
            ["package", "version", "index"],
            [
                [n, variant.packages.get(n, row.packages[n]), variant.package_index.get(n, row.index_of(n))]
                for n in dict.fromkeys([*variant.packages, *variant.package_index])
            ],
        )
    console.print("Serving hints:")
    for hint in row.runtime_hints:
        console.print(hint_text(hint), soft_wrap=True, markup=False)


def hint_text(hint: RuntimeHint) -> str:
    env = " ".join(f"{k}={v}" for k, v in hint.env.items())
    serve_args = " ".join(shlex.quote(a) for a in hint.serve_args)
    return (
        f"- {hint.text}"
        + (f" (vllm-ascend {hint.plugin})" if hint.plugin else "")
        + (f"\n    env: {env}" if env else "")
        + (f"\n    serve args: {serve_args}" if serve_args else "")
    )


def one_file(command: str, file: Optional[str], matrix: Optional[Path]) -> Optional[str]:
    """`matrix validate|check [FILE]`: the file, or --matrix's, not both."""
    if file and matrix:
        raise BadInput(f"matrix {command} takes one file: {file} or --matrix {matrix}, not both")
    return file or (str(matrix) if matrix else None)


def run_validate(options: ValidateOptions, output: Output) -> Result:
    matrix = load_matrix(one_file("validate", options.file, options.matrix))
    document = ValidateDocument(matrix=matrix.source, valid=True, rows=matrix.versions())
    return Result(
        0,
        document,
        lambda console: console.print(
            f"{matrix.source}: valid, {len(matrix.rows)} rows ({', '.join(matrix.versions())})"
        ),
    )


def _mirror(index_url: Optional[str]) -> List[str]:
    from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings

    settings = network_settings_for_this_run(pip_settings())
    return [index_url or settings.index]  # checked as the flag was parsed


def _versions(options: DeriveOptions) -> None:
    from packaging.version import InvalidVersion, Version

    for flag, value in (("--vllm-ascend", options.vllm_ascend), ("--cann", options.cann)):
        try:
            Version(value)
        except InvalidVersion:
            raise BadInput(f"{flag} {value!r} is not a version") from None


def run_derive(options: DeriveOptions, output: Output) -> Result:
    from ascend_setup.matrix.derive import derive_row, into_matrix, row_yaml
    from ascend_setup.matrix.load import parse_matrix
    from ascend_setup.utils.files import atomic_write_text, read_regular_text

    _versions(options)
    matrix = load_matrix(options.matrix).with_indexes(index_overrides(options.index))
    target = Path(options.into).expanduser().absolute() if options.into else None
    if target is not None:
        try:
            original = read_regular_text(target)
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"--into {target} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    derived = derive_row(matrix, options.vllm_ascend, options.cann, _mirror(options.index_url))
    document = DeriveDocument(
        cann=derived.cann,
        row=derived.row,
        provenance=derived.provenance,
        problems=derived.problems,
        notes=derived.notes,
    )
    if output.json:
        output.print_json(document.model_dump(mode="json"))
    else:
        stdout_console().print(row_yaml(derived), soft_wrap=True, markup=False, highlight=False)
    for problem in derived.problems:
        stderr_console().print(f"not verified: {problem}", soft_wrap=True, markup=False)
    for note in derived.notes:
        stderr_console().print(f"note: {note}", soft_wrap=True, markup=False)
    if target is not None:
        if derived.problems:
            raise AscendSetupError(
                f"--into {target}: not written, {len(derived.problems)} field(s) could not be read",
                hint="run it where every index of the row can be reached (or --index NAME=URL)",
            )
        updated = into_matrix(original, derived)
        parse_matrix(updated, str(target))  # what is written must validate
        atomic_write_text(target, updated)
        stderr_console().print(f"row {derived.cann} written to {target}", soft_wrap=True, markup=False)
    return Result(1 if derived.problems else 0, document)


def run_check(options: CheckOptions, output: Output) -> Result:

    source = one_file("check", options.file, options.matrix)
    matrix = load_matrix(source).with_indexes(index_overrides(options.index))
    sdists = sdist_versions(options.sdist or [], matrix)
    live = LiveCheck(matrix, _mirror(options.index_url), options.pre) if options.live else None
    report = check_rows(matrix, sdists, live)
    bad = any(entry.bad(options.strict) for entry in report.values())
    document = CheckDocument(
        matrix=matrix.source, live=options.live, pre=options.pre, strict=options.strict, rows=report, ok=not bad
    )
    return Result(1 if bad else 0, document, lambda console: render_check(console, report, options.live))


def render_check(console: Console, report: Dict[str, RowCheck], live: bool) -> None:
    for cann, entry in report.items():
        state = "drift" if entry.drift or entry.inconsistent or entry.stale_hints else "ok"
        console.print(
            f"row {cann}: {state}"
            + ("" if live else " (internal checks; --live compares with the packages' metadata)"),
            soft_wrap=True,
            markup=False,
        )
        for line in entry.inconsistent + entry.drift + entry.stale_hints:
            console.print(f"  - {line}", soft_wrap=True, markup=False)
        for line in entry.unverified:
            console.print(f"  ? not verified: {line}", soft_wrap=True, markup=False)
        for release in entry.newer:
            pre = " (pre-release)" if release.prerelease else ""
            console.print(
                f"  + newer on CANN {cann}: vllm-ascend {release.version}{pre}, {release.files}; "
                f"CANN from {release.cann_source}",
                soft_wrap=True,
                markup=False,
            )
            for line in release.differs or ["no pin differs"]:
                console.print(f"      {line}", soft_wrap=True, markup=False)


def matrix_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="matrix_command", metavar="list|show|validate|derive|check")
    sub.required = True
    m = sub.add_parser("list", help="known rows")
    flags.common(m)
    m.set_defaults(func=run_list, options=MatrixOptions)
    m = sub.add_parser("show", help="one whole row")
    flags.common(m)
    m.add_argument("cann", metavar="CANN", help="the row's CANN version, e.g. 9.1.0")
    m.set_defaults(func=run_show, options=ShowOptions)
    m = sub.add_parser("validate", help="check a matrix file")
    flags.common(m)
    m.add_argument("file", nargs="?", metavar="FILE", help="the matrix file to check (default: the one in use)")
    m.set_defaults(func=run_validate, options=ValidateOptions)
    m = sub.add_parser(
        "derive", help="a row read from vllm-ascend's, torch-npu's and vllm's own metadata on the indexes"
    )
    flags.common(m)
    flags.vllm_ascend(m, "the vllm-ascend release, e.g. 0.23.0", required=True)
    flags.cann(m, "the CANN version it pairs with (no metadata says it)", required=True)
    flags.index_url(m, "the PyPI index to read (default: pip's configuration)")
    flags.index(m)
    m.add_argument("--into", metavar="FILE", help="add the row to this matrix file, or replace that CANN's row in it")
    m.set_defaults(func=run_derive, options=DeriveOptions)
    m = sub.add_parser(
        "check", help="each row's internal consistency; with --live, against the packages' real metadata"
    )
    flags.common(m)
    m.add_argument("file", nargs="?", metavar="FILE", help="the matrix file to check (default: the one in use)")
    m.add_argument(
        "--live", action="store_true", help="compare every row's pins, indexes and wheel_glibc with the indexes"
    )
    m.add_argument(
        "--pre", action="store_true", help="with --live: list newer pre-releases too (default: finals, posts)"
    )
    m.add_argument(
        "--strict", action="store_true", help="exit 1 when a newer release exists (default: it is information)"
    )
    m.add_argument(
        "--sdist",
        metavar="FILE",
        action="append",
        help="a vllm-ascend sdist a row pins: flag hints "
        "whose environment variables its source no longer reads (repeatable)",
    )
    flags.index_url(m, "the PyPI index to read (default: pip's configuration)")
    flags.index(m)
    m.set_defaults(func=run_check, options=CheckOptions)


ARGUMENTS = {"matrix": matrix_arguments}
