"""Loading the matrix file, with errors that name the file and the line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence, Tuple, Union

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ascend_setup.errors import BadInput
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.utils.inputs import check_yaml_shape, read_input_text

#: libyaml when present (fast), the pure-Python loader otherwise; both keep line marks.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PACKAGED_MATRIX = Path(__file__).resolve().parent.parent / "data" / "compat_matrix.yaml"
MATRIX_ENV = "ASCEND_SETUP_MATRIX"


def matrix_path(explicit: Optional[Union[str, Path]] = None) -> Tuple[Path, str]:
    """(the file, where it came from): --matrix wins, then $ASCEND_SETUP_MATRIX, then the packaged file."""
    if explicit:
        return Path(explicit), "--matrix"
    if os.environ.get(MATRIX_ENV):
        return Path(os.environ[MATRIX_ENV]), MATRIX_ENV
    return PACKAGED_MATRIX, "the packaged matrix"


def _line_of(node: Optional[yaml.Node], loc: Sequence[Union[str, int]]) -> int:
    """Follow a pydantic error location through the YAML node tree; the deepest line reached."""
    line = node.start_mark.line + 1 if node is not None else 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
            if match is None:
                break
            node = match[1]
            line = match[0].start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _describe(error: ErrorDetails) -> str:
    loc = ".".join(str(p) for p in error["loc"] if p != "cann")
    message = error["msg"][len("Value error, ") :] if error["msg"].startswith("Value error, ") else error["msg"]
    if error["type"] == "missing":
        return f"{loc}: required field is missing"
    if error["type"] == "extra_forbidden":
        return f"{loc}: unknown field"
    return f"{loc}: {message}"


def _fix_hint(source: str) -> str:
    if Path(source) == PACKAGED_MATRIX:
        return "the packaged matrix is damaged: reinstall ascend-setup"
    return (
        f"fix {source} (the packaged compat_matrix.yaml shows the expected shape), or drop --matrix / "
        f"{MATRIX_ENV} to use the packaged matrix"
    )


def parse_matrix(text: str, source: str) -> Matrix:
    """Validate matrix text. Raises BadInput naming `source`, the line and the problem."""
    check_yaml_shape(text, source, hint=_fix_hint(source))
    loader = _Loader(text)
    try:
        root = loader.get_single_node()  # kept for mapping errors back to lines
        data: Any = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInput(f"{source}:{line}: not valid YAML: {problem}", hint=_fix_hint(source)) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise BadInput(f"{source}:1: the matrix must be a mapping with 'schema', 'indexes' and 'rows'")
    # Top-level keys starting with '_' hold YAML anchors shared by rows; they are not data.
    data = {k: v for k, v in data.items() if not str(k).startswith("_")}
    data["source"] = source
    try:
        return Matrix.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = list(first["loc"])
        line = _line_of(root, loc)
        raise BadInput(f"{source}:{line}: {_describe(first)}", hint=_fix_hint(source)) from None


def load_matrix(explicit: Optional[Union[str, Path]] = None) -> Matrix:
    """Read and validate the matrix the user chose (or the packaged one)."""
    path, source = matrix_path(explicit)
    text = read_input_text(path, "matrix", what=f"matrix file {path} ({source})")
    return parse_matrix(text, str(path))


def select_row(matrix: Matrix, cann: str, arch: Optional[str] = None) -> Row:
    """The whole row for `cann` (as a host of `arch` takes it, when given); an unknown version is bad
    input that lists the known ones."""
    row = matrix.rows.get(cann.strip())
    if row is None:
        raise BadInput(
            f"unknown CANN version {cann!r}; known versions: {', '.join(matrix.versions())}",
            hint="pick one of the known versions or add a row to the matrix (--matrix FILE)",
        )
    return row.for_arch(arch) if arch else row
