"""`matrix check`: each row held to itself (its pins consistent, its hints still read by the sdist it pins)
and, live, to the packages' own metadata on the indexes (drift, newer releases)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from pydantic import BaseModel, ConfigDict

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.matrix.models import Matrix, Row


class NewerRelease(BaseModel):
    """A vllm-ascend release newer than the row's, as the index has it (matrix/releases.Release)."""

    model_config = ConfigDict(extra="forbid")

    version: str
    prerelease: bool
    files: str
    cann: Optional[str] = None
    cann_source: str = ""
    differs: List[str] = []
    not_verified: List[str] = []


class RowCheck(BaseModel):
    """What `matrix check` found for one row."""

    model_config = ConfigDict(extra="forbid")

    inconsistent: List[str] = []
    drift: List[str] = []
    unverified: List[str] = []
    newer: List[NewerRelease] = []
    stale_hints: List[str] = []

    def bad(self, strict: bool) -> bool:
        """Drift of any kind; a newer release only under --strict (it is information otherwise)."""
        return bool(self.inconsistent or self.drift or self.stale_hints or (strict and self.newer))


def sdist_versions(paths: Sequence[str], matrix: Matrix) -> Dict[str, Path]:
    """--sdist FILE (repeatable) -> {vllm-ascend version: path}; a file that is not a vllm-ascend sdist, or one
    no row pins, is bad input."""
    from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename

    found: Dict[str, Path] = {}
    for value in paths:
        path = Path(value).expanduser().absolute()
        try:
            name, version = parse_sdist_filename(path.name)
        except InvalidSdistFilename:
            raise BadInput(f"--sdist {path}: not an sdist file name (vllm_ascend-VERSION.tar.gz)") from None
        if canonicalize_name(name) != "vllm-ascend" or not path.is_file():
            raise BadInput(f"--sdist {path}: " + ("not a vllm-ascend sdist" if path.is_file() else "no such file"))
        found[str(version)] = path
    unknown = [v for v in found if v not in {r.packages["vllm-ascend"] for r in matrix.rows.values()}]
    if unknown:
        raise BadInput(f"--sdist: no row of {matrix.source} pins vllm-ascend {unknown[0]}")
    return found


class LiveCheck:
    """A row against the indexes: its pins re-derived from the packages' metadata, and the releases newer
    than its vllm-ascend. The index pages are read once and shared by every row's lookups."""

    def __init__(self, matrix: Matrix, mirror: List[str], pre: bool) -> None:
        from ascend_setup.index.metadata import MetadataReader

        self.matrix, self.mirror, self.pre = matrix, mirror, pre
        self.reader = MetadataReader()
        self.pool: Dict[str, Any] = {}

    def into(self, entry: RowCheck, row: Row) -> None:
        from ascend_setup.index.http import IndexUnreachable
        from ascend_setup.matrix.derive import compare_rows, derive_row
        from ascend_setup.matrix.releases import newer_releases

        try:
            derived = derive_row(
                self.matrix, row.packages["vllm-ascend"], row.cann, self.mirror, reader=self.reader, pool=self.pool
            )
            entry.drift, entry.unverified = compare_rows(row, derived), derived.problems
            newer = newer_releases(self.matrix, row, self.mirror, pre=self.pre, reader=self.reader, pool=self.pool)
            entry.newer = [NewerRelease.model_validate(r.to_json()) for r in newer]
        except IndexUnreachable as exc:  # not drift: the plugin's own metadata could not be read
            entry.unverified = [exc.message]
        except AscendSetupError as exc:  # the row's own vllm-ascend is published nowhere
            entry.drift = [exc.message]


def check_rows(matrix: Matrix, sdists: Dict[str, Path], live: Optional[LiveCheck]) -> Dict[str, RowCheck]:
    """Every row, newest first: what is wrong with it (and, live, what is new)."""
    from ascend_setup.matrix.derive import consistency
    from ascend_setup.matrix.serve_hints import unread_variables

    report: Dict[str, RowCheck] = {}
    for cann in matrix.versions():
        row = matrix.rows[cann]
        entry = RowCheck(inconsistent=consistency(row))
        if row.packages["vllm-ascend"] in sdists:
            entry.stale_hints = unread_variables(row.hints(), sdists[row.packages["vllm-ascend"]])
        if live is not None:
            live.into(entry, row)
        report[cann] = entry
    return report
