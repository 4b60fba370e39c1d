"""A CANN without a row: `install`/`plan`/`doctor --cann X --vllm-ascend Y` derive the row from the live metadata
instead of dead-ending. The install records the matrix with that row in its workdir, so `resume` and `audit`
take the very same row offline; `matrix derive --into FILE` stays the way to keep it for good."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

from packaging.version import Version

from ascend_setup.errors import BadInput
from ascend_setup.matrix.load import parse_matrix
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.utils.files import atomic_write_text, read_regular_text

if TYPE_CHECKING:  # audit imports this module for recorded_matrix: no HTTP stack at start-up
    from ascend_setup.matrix.derive import DerivedRow

#: The matrix an install with a derived row runs on, in its workdir (what resume and audit read).
DERIVED_MATRIX = "matrix.yaml"
#: What a derivation depends on: the matrix (its file, its indexes), the CANN, the vllm-ascend and the mirror.
_DeriveKey = Tuple[str, Tuple[Tuple[str, str], ...], str, str, Tuple[str, ...]]
_derived: Dict[_DeriveKey, DerivedRow] = {}  # one derivation per run, however many callers ask


def _unknown(matrix: Matrix, cann: str, index: Callable[[], str]) -> BadInput:
    """The unknown-CANN error, naming the plugin releases the index has for that CANN when it can tell (a CANN
    older than every row predates the releases the matrix knows: the index is not asked)."""
    from ascend_setup.index.http import IndexUnreachable
    from ascend_setup.matrix.releases import releases_for_cann

    found = []
    try:
        if Version(cann) > min(Version(v) for v in matrix.rows):
            found = releases_for_cann(matrix, cann, [index()])
    except (IndexUnreachable, ValueError):  # ValueError: --cann is not a version at all
        found = []
    known = f"unknown CANN version {cann!r}; known versions: {', '.join(matrix.versions())}"
    if not found:
        return BadInput(
            known,
            hint="pick one of the known versions, add a row (matrix derive --into FILE), or "
            "derive one now with --vllm-ascend VERSION",
        )
    names = ", ".join(r.label() for r in found)
    return BadInput(
        f"{known}; the index has vllm-ascend {names} for CANN {cann}",
        hint=f"derive its row now with --vllm-ascend {found[-1].version} (or keep it: matrix derive --into FILE)",
    )


def with_derived_row(
    matrix: Matrix, cann: str, vllm_ascend: Optional[str], index: Callable[[], str]
) -> Tuple[Matrix, Optional[DerivedRow]]:
    """(the matrix, None) when it has a row for `cann`; else (the matrix with the row derived from
    `vllm_ascend`'s metadata on `index()`, asked only then; the derivation). Without `vllm_ascend` an unknown
    CANN is bad input."""
    cann = cann.strip()
    if cann in matrix.rows:
        if vllm_ascend and matrix.rows[cann].packages["vllm-ascend"] != vllm_ascend:
            raise BadInput(
                f"--vllm-ascend {vllm_ascend}: the row for CANN {cann} pins vllm-ascend "
                f"{matrix.rows[cann].packages['vllm-ascend']}; take the whole row, never mix rows",
                hint="drop --vllm-ascend (it is for a CANN without a row)",
            )
        return matrix, None
    if not vllm_ascend:
        raise _unknown(matrix, cann, index)
    from ascend_setup.matrix.derive import derive_row

    mirror = [index()]
    key = (matrix.source, tuple(sorted(matrix.indexes.items())), cann, vllm_ascend, tuple(mirror))
    if key not in _derived:
        _derived[key] = derive_row(matrix, vllm_ascend, cann, mirror)
    derived = _derived[key]
    row = Row.model_validate({**derived.row, "cann": cann})
    return matrix.model_copy(update={"rows": {**matrix.rows, cann: row}}), derived


def provenance_line(derived: DerivedRow, matrix: Matrix) -> str:
    """The one line that says the row was derived, from what."""
    from ascend_setup.matrix.derive import CARRIED

    plugin = derived.provenance.get("packages.torch-npu", "the plugin's metadata").split(" ")[0]
    carried = derived.provenance.get(CARRIED[0], "").split(" (")[0]
    unverified = f"; not verified: {', '.join(p.split(':')[0] for p in derived.problems)}" if derived.problems else ""
    unverified += "".join(f"; {note}" for note in derived.notes)
    return (
        f"CANN {derived.cann} has no row in {matrix.source}: derived from vllm-ascend "
        f"{derived.row['packages']['vllm-ascend']}'s own metadata ({plugin} Requires-Dist and Requires-Python; "
        f"{', '.join(CARRIED)} from {carried}){unverified}"
    )


def record(matrix: Matrix, derived: DerivedRow, workdir: Path) -> Path:
    """Write the matrix file in use, with the derived row (and its provenance comments), into the workdir."""
    from ascend_setup.matrix.derive import into_matrix

    target = workdir / DERIVED_MATRIX
    text = into_matrix(read_regular_text(Path(matrix.source)), derived)
    parse_matrix(text, str(target))  # what is written must validate
    workdir.mkdir(parents=True, exist_ok=True)  # the install's own workdir: its first write may be this one
    atomic_write_text(target, text)
    return target


def recorded_matrix(venv: Path) -> Optional[str]:
    """The matrix with the derived row an install of `venv` recorded in its workdir, unless the user chose one
    (--matrix is the caller's, $ASCEND_SETUP_MATRIX is checked here); None for every other venv."""
    from ascend_setup.dists.venv_reader import read_venv_record
    from ascend_setup.matrix.load import MATRIX_ENV

    record = read_venv_record(venv)
    if record is None or os.environ.get(MATRIX_ENV):
        return None
    path = Path(record.workdir) / DERIVED_MATRIX
    return str(path) if path.is_file() else None
