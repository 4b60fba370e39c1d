"""`ascend-setup plan`: the wheel-or-build forecast for any target."""

from __future__ import annotations

import argparse
import platform
import sys

from ascend_setup.errors import AscendSetupError
from ascend_setup.forecast import forecast
from ascend_setup.host.interpreters import choose_interpreter
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.pipconfig import configured_index
from ascend_setup.index.simple import IndexSet
from ascend_setup.index.tags import Target
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.matrix.models import Row
from ascend_setup.options import check_index_url
from ascend_setup.render import print_json, stdout_console, table


def _default_python(row: Row) -> str:
    try:
        return choose_interpreter(row.python).minor
    except AscendSetupError:
        return "%d.%d" % sys.version_info[:2]


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n else ""


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    row = select_row(matrix, args.cann)
    target = Target.parse(args.glibc or glibc_version() or "", args.arch or platform.machine(),
                          args.python or _default_python(row))
    primary = check_index_url(args.index_url, "--index-url") if args.index_url else configured_index()
    extras = [check_index_url(u, "--extra-index-url") for u in args.extra_index_url] if args.extra_index_url \
        else matrix.extra_indexes(row)
    result = forecast(row, target, IndexSet([primary, *extras]))
    if args.json:
        print_json(result.to_json())
    else:
        console = stdout_console()
        t = result.target
        console.print(table(f"CANN {row.cann} on glibc {t.glibc} / {t.arch} / Python {t.python}",
                            ["package", "version", "outcome", "file", "size", "reason"],
                            [[c.name, c.version, c.outcome, c.file.filename if c.file else "",
                              _size(c.file.size or 0) if c.file else "", c.reason or ""] for c in result.choices],
                            status_column=2))
        console.print(f"download: {_size(result.download_bytes) or '0 MB'} from {', '.join(result.indexes)}")
        for warning in result.warnings:
            console.print(f"[yellow]warning:[/yellow] {warning}")
    return 1 if result.unavailable else 0
