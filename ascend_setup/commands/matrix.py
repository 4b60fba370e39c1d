"""`ascend-setup matrix list | show CANN | validate [FILE]`."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any, Dict, List, TypedDict

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_table, stderr_console, stdout_console
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.matrix import load_matrix, select_row


def run_list(args: argparse.Namespace, output: Output) -> int:
    matrix = load_matrix(args.matrix)
    rows = [matrix.rows[v] for v in matrix.versions()]
    if args.json:
        output.print_json(
            {
                "matrix": matrix.source,
                "rows": [
                    {
                        "cann": r.cann,
                        "python": r.python,
                        "vllm-ascend": r.packages["vllm-ascend"],
                        "vllm": r.packages["vllm"],
                        "torch": r.packages["torch"],
                        "torch-npu": r.packages["torch-npu"],
                    }
                    for r in rows
                ],
            }
        )
        return 0
    print_table(
        stdout_console(),
        f"Compatibility matrix ({matrix.source})",
        ["CANN", "Python", "vllm-ascend", "vllm", "torch", "torch-npu", "triton-ascend"],
        [
            [r.cann, r.python, *(r.packages[n] for n in ("vllm-ascend", "vllm", "torch", "torch-npu", "triton-ascend"))]
            for r in rows
        ],
    )
    return 0


def run_show(args: argparse.Namespace, output: Output) -> int:
    matrix = load_matrix(args.matrix)
    row = select_row(matrix, args.cann)
    data = row.to_json()
    data["indexes"] = dict(matrix.indexes)
    if args.json:
        output.print_json(data)
        return 0
    console = stdout_console()
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
        env = " ".join(f"{k}={v}" for k, v in hint.env.items())
        serve_args = " ".join(shlex.quote(a) for a in hint.serve_args)
        console.print(
            f"- {hint.text}"
            + (f" (vllm-ascend {hint.plugin})" if hint.plugin else "")
            + (f"\n    env: {env}" if env else "")
            + (f"\n    serve args: {serve_args}" if serve_args else ""),
            soft_wrap=True,
            markup=False,
        )
    return 0


def run_validate(args: argparse.Namespace, output: Output) -> int:
    if args.file and args.matrix:
        raise BadInput(f"matrix validate takes one file: {args.file} or --matrix {args.matrix}, not both")
    matrix = load_matrix(args.file or args.matrix)
    if args.json:
        output.print_json({"matrix": matrix.source, "valid": True, "rows": matrix.versions()})
    else:
        stdout_console().print(f"{matrix.source}: valid, {len(matrix.rows)} rows ({', '.join(matrix.versions())})")
    return 0


def _mirror(args: argparse.Namespace) -> List[str]:
    from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings
    from ascend_setup.steps.options import check_index_url

    settings = network_settings_for_this_run(pip_settings())
    return [check_index_url(args.index_url, "--index-url") if args.index_url else settings.index]


def run_derive(args: argparse.Namespace, output: Output) -> int:
    from packaging.version import InvalidVersion, Version

    from ascend_setup.matrix.derive import derive_row, into_matrix, row_yaml
    from ascend_setup.matrix.load import parse_matrix
    from ascend_setup.steps.options import parse_index_overrides
    from ascend_setup.utils.files import atomic_write_text, read_regular_text

    for flag, value in (("--vllm-ascend", args.vllm_ascend), ("--cann", args.cann)):
        try:
            Version(value)
        except InvalidVersion:
            raise BadInput(f"{flag} {value!r} is not a version") from None
    matrix = load_matrix(args.matrix).with_indexes(parse_index_overrides(args.index or []))
    target = Path(args.into).expanduser().absolute() if args.into else None
    if target is not None:
        try:
            original = read_regular_text(target)
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"--into {target} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    derived = derive_row(matrix, args.vllm_ascend, args.cann, _mirror(args))
    if args.json:
        output.print_json(
            {
                "cann": derived.cann,
                "row": derived.row,
                "provenance": derived.provenance,
                "problems": derived.problems,
                "notes": derived.notes,
            }
        )
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
    return 1 if derived.problems else 0


def _sdists(paths: List[str]) -> Dict[str, Path]:
    """--sdist FILE (repeatable) -> {vllm-ascend version: path}; a file that is not a vllm-ascend sdist is bad input."""
    from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename

    found = {}
    for value in paths:
        path = Path(value).expanduser().absolute()
        try:
            name, version = parse_sdist_filename(path.name)
        except InvalidSdistFilename:
            raise BadInput(f"--sdist {path}: not an sdist file name (vllm_ascend-VERSION.tar.gz)") from None
        if canonicalize_name(name) != "vllm-ascend" or not path.is_file():
            raise BadInput(f"--sdist {path}: " + ("not a vllm-ascend sdist" if path.is_file() else "no such file"))
        found[str(version)] = path
    return found


class RowCheck(TypedDict):
    """What `matrix check` found for one row (one entry of its --json `rows`)."""

    inconsistent: List[str]
    drift: List[str]
    unverified: List[str]
    newer: List[Dict[str, Any]]
    stale_hints: List[str]


def run_check(args: argparse.Namespace, output: Output) -> int:
    from ascend_setup.index.http import IndexUnreachable
    from ascend_setup.index.metadata import MetadataReader
    from ascend_setup.matrix.derive import compare_rows, consistency, derive_row
    from ascend_setup.matrix.releases import newer_releases
    from ascend_setup.matrix.serve_hints import unread_variables
    from ascend_setup.steps.options import parse_index_overrides

    if args.file and args.matrix:
        raise BadInput(f"matrix check takes one file: {args.file} or --matrix {args.matrix}, not both")
    matrix = load_matrix(args.file or args.matrix).with_indexes(parse_index_overrides(args.index or []))
    sdists = _sdists(args.sdist or [])
    unknown = [v for v in sdists if v not in {r.packages["vllm-ascend"] for r in matrix.rows.values()}]
    if unknown:
        raise BadInput(f"--sdist: no row of {matrix.source} pins vllm-ascend {unknown[0]}")
    mirror = _mirror(args) if args.live else []
    reader = MetadataReader()
    pool: Dict[str, Any] = {}  # the index pages, shared by every row's lookups
    report: Dict[str, RowCheck] = {}
    for cann in matrix.versions():
        row = matrix.rows[cann]
        entry: RowCheck = {
            "inconsistent": consistency(row),
            "drift": [],
            "unverified": [],
            "newer": [],
            "stale_hints": [],
        }
        if row.packages["vllm-ascend"] in sdists:
            entry["stale_hints"] = unread_variables(row.hints(), sdists[row.packages["vllm-ascend"]])
        if args.live:
            try:
                derived = derive_row(matrix, row.packages["vllm-ascend"], cann, mirror, reader=reader, pool=pool)
                entry["drift"], entry["unverified"] = compare_rows(row, derived), derived.problems
                entry["newer"] = [
                    r.to_json() for r in newer_releases(matrix, row, mirror, pre=args.pre, reader=reader, pool=pool)
                ]
            except IndexUnreachable as exc:  # not drift: the plugin's own metadata could not be read
                entry["unverified"] = [exc.message]
            except AscendSetupError as exc:  # the row's own vllm-ascend is published nowhere
                entry["drift"] = [exc.message]
        report[cann] = entry
    bad = any(
        e["inconsistent"] or e["drift"] or e["stale_hints"] or (args.strict and e["newer"]) for e in report.values()
    )
    if args.json:
        output.print_json(
            {
                "matrix": matrix.source,
                "live": args.live,
                "pre": args.pre,
                "strict": args.strict,
                "rows": report,
                "ok": not bad,
            }
        )
        return 1 if bad else 0
    console = stdout_console()
    for cann, entry in report.items():
        state = "drift" if entry["drift"] or entry["inconsistent"] or entry["stale_hints"] else "ok"
        console.print(
            f"row {cann}: {state}"
            + ("" if args.live else " (internal checks; --live compares with the packages' metadata)"),
            soft_wrap=True,
            markup=False,
        )
        for line in entry["inconsistent"] + entry["drift"] + entry["stale_hints"]:
            console.print(f"  - {line}", soft_wrap=True, markup=False)
        for line in entry["unverified"]:
            console.print(f"  ? not verified: {line}", soft_wrap=True, markup=False)
        for release in entry["newer"]:
            pre = " (pre-release)" if release["prerelease"] else ""
            console.print(
                f"  + newer on CANN {cann}: vllm-ascend {release['version']}{pre}, {release['files']}; "
                f"CANN from {release['cann_source']}",
                soft_wrap=True,
                markup=False,
            )
            for line in release["differs"] or ["no pin differs"]:
                console.print(f"      {line}", soft_wrap=True, markup=False)
    return 1 if bad else 0


def matrix_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="matrix_command", metavar="list|show|validate|derive|check")
    sub.required = True
    m = sub.add_parser("list", help="known rows")
    flags.common(m)
    m.set_defaults(func=run_list)
    m = sub.add_parser("show", help="one whole row")
    flags.common(m)
    m.add_argument("cann", metavar="CANN", help="the row's CANN version, e.g. 9.1.0")
    m.set_defaults(func=run_show)
    m = sub.add_parser("validate", help="check a matrix file")
    flags.common(m)
    m.add_argument("file", nargs="?", metavar="FILE", help="the matrix file to check (default: the one in use)")
    m.set_defaults(func=run_validate)
    m = sub.add_parser(
        "derive", help="a row read from vllm-ascend's, torch-npu's and vllm's own metadata on the indexes"
    )
    flags.common(m)
    flags.vllm_ascend(m, "the vllm-ascend release, e.g. 0.23.0", required=True)
    flags.cann(m, "the CANN version it pairs with (no metadata says it)", required=True)
    flags.index_url(m, "the PyPI index to read (default: pip's configuration)")
    flags.index(m)
    m.add_argument("--into", metavar="FILE", help="add the row to this matrix file, or replace that CANN's row in it")
    m.set_defaults(func=run_derive)
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
    m.set_defaults(func=run_check)


ARGUMENTS = {"matrix": matrix_arguments}
