"""`ascend-setup matrix list | show CANN | validate [FILE]`."""

from __future__ import annotations

import argparse
import shlex

from ascend_setup.errors import BadInput
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.render import print_json, stdout_console, table


def run_list(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    rows = [matrix.rows[v] for v in matrix.versions()]
    if args.json:
        print_json({"matrix": matrix.source, "rows": [
            {"cann": r.cann, "python": r.python, "vllm-ascend": r.packages["vllm-ascend"], "vllm": r.packages["vllm"],
             "torch": r.packages["torch"], "torch-npu": r.packages["torch-npu"]} for r in rows]})
        return 0
    stdout_console().print(table(f"Compatibility matrix ({matrix.source})",
                                 ["CANN", "Python", "vllm-ascend", "vllm", "torch", "torch-npu", "triton-ascend"],
                                 [[r.cann, r.python, *(r.packages[n] for n in
                                   ("vllm-ascend", "vllm", "torch", "torch-npu", "triton-ascend"))] for r in rows]))
    return 0


def run_show(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    row = select_row(matrix, args.cann)
    data = row.to_json()
    data["indexes"] = dict(matrix.indexes)
    if args.json:
        print_json(data)
        return 0
    console = stdout_console()
    console.print(table(f"CANN {row.cann}  (Python {row.python})", ["package", "version", "index"],
                        [[n, v, row.index_of(n)] for n, v in row.packages.items()]))
    console.print(table("CANN operator compiler's Python dependencies", ["package", "minimum"],
                        [[n, m or "any"] for n, m in row.cann_python_deps.items()]))
    console.print("CUDA-only requirements of vllm that are stripped: " + ", ".join(row.cuda_only))
    for arch, variant in row.arch.items():
        console.print(table(f"on {arch}", ["package", "version", "index"],
                            [[n, variant.packages.get(n, row.packages[n]), variant.package_index.get(n, row.index_of(n))]
                             for n in dict.fromkeys([*variant.packages, *variant.package_index])]))
    console.print("Serving hints:")
    for hint in row.runtime_hints:
        env = " ".join(f"{k}={v}" for k, v in hint.env.items())
        args = " ".join(shlex.quote(a) for a in hint.serve_args)
        console.print(f"- {hint.text}" + (f"\n    env: {env}" if env else "") + (f"\n    serve args: {args}" if args else ""),
                      soft_wrap=True, markup=False)
    return 0


def run_validate(args: argparse.Namespace) -> int:
    if args.file and args.matrix:
        raise BadInput(f"matrix validate takes one file: {args.file} or --matrix {args.matrix}, not both")
    matrix = load_matrix(args.file or args.matrix)
    if args.json:
        print_json({"matrix": matrix.source, "valid": True, "rows": matrix.versions()})
    else:
        stdout_console().print(f"{matrix.source}: valid, {len(matrix.rows)} rows ({', '.join(matrix.versions())})")
    return 0
