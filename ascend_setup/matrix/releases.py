"""The plugin's releases on the index: which CANN each is for, and how one differs from a matrix row.

A release's CANN is not in its Requires-Dist. The matrix knows it for the releases its rows pin, and for a few
whose own README says otherwise (`plugin_cann`); every other release says it in its README's Prerequisites
("CANN == 9.1.0"), which is the long description of its core metadata, so reading it costs no download.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from packaging.version import Version

from ascend_setup.dists.versions import pin_verdict
from ascend_setup.index.http import IndexUnreachable
from ascend_setup.index.metadata import MetadataReader
from ascend_setup.index.simple import IndexFile, IndexSet
from ascend_setup.index.tags import manylinux_glibc, platform_arch
from ascend_setup.matrix.derive import ARCHES, compare_rows, derive_row
from ascend_setup.matrix.models import Matrix, Row

PLUGIN = "vllm-ascend"
#: The README's Prerequisites line, e.g. "- CANN == 9.1.0 (For Ascend HDK version, ...)".
CANN_IN_README = re.compile(r"CANN\s*==\s*(\d+\.\d+\.\d+)")


@dataclass
class Release:
    """One vllm-ascend release as the index has it."""

    version: str
    prerelease: bool
    files: str  # "wheels (...)" or "sdist only (...)"
    cann: Optional[str] = None
    cann_source: str = ""
    differs: List[str] = field(default_factory=list)  # against the row it is compared with
    not_verified: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        return self.version + (" (pre-release)" if self.prerelease else "")


def plugin_files(main: IndexSet) -> Dict[Version, List[IndexFile]]:
    """version -> the files of that vllm-ascend release (yanked ones left out); an unreachable index raises."""
    pages = main.pages(PLUGIN)
    errors = [p.error for p in pages if p.error]
    if errors and not any(p.files for p in pages):
        raise IndexUnreachable(f"{PLUGIN}'s releases could not be listed: {errors[0]}")
    found: Dict[Version, List[IndexFile]] = {}
    for page in pages:
        for f in page.files:
            if not f.yanked:
                found.setdefault(f.version, []).append(f)
    return found


def files_text(files: List[IndexFile]) -> str:
    """Wheel or sdist, said the way a user needs it: which hosts get a wheel, or that every host builds it."""
    levels: Dict[str, Tuple[int, ...]] = {}
    for f in files:
        if f.kind != "wheel":
            continue
        for tag in f.tags:
            arch, glibc = platform_arch(tag.platform), manylinux_glibc(tag.platform)
            if arch in ARCHES and glibc and (arch not in levels or glibc < levels[arch]):
                levels[arch] = glibc
    if not levels:
        return "sdist only (every host builds it)"
    return "wheels (" + ", ".join(f"{a} glibc >= {'.'.join(map(str, g))}" for a, g in sorted(levels.items())) + ")"


def cann_of(matrix: Matrix, version: str, files: List[IndexFile], reader: MetadataReader) -> Tuple[Optional[str], str]:
    """(the CANN the release is for, where that was read); (None, why) when nothing says it."""
    for row in matrix.rows.values():
        verdict = pin_verdict(PLUGIN, version, row.packages[PLUGIN])
        if verdict.accepted:
            return row.cann, f"row {row.cann} of the matrix" + (f" ({verdict.note})" if verdict.note else "")
    if version in matrix.plugin_cann:
        return matrix.plugin_cann[version], "the matrix's plugin_cann (the plugin's README lags)"
    chosen = next((f for f in files if f.kind == "wheel"), files[0])
    try:
        match = CANN_IN_README.search(reader.metadata(chosen))
    except IndexUnreachable as exc:
        return None, f"{chosen.filename}'s README could not be read ({exc.message})"
    if match is None:
        return None, f"{chosen.filename}'s README names no CANN"
    return match.group(1), f"{chosen.filename}'s README (Prerequisites)"


def _released(
    matrix: Matrix, versions: Dict[Version, List[IndexFile]], wanted: List[Version], reader: MetadataReader
) -> List[Release]:
    """Each wanted version with its CANN, read concurrently (one metadata file each)."""

    def one(version: Version) -> Release:
        files = versions[version]
        cann, source = cann_of(matrix, str(version), files, reader)
        return Release(
            version=str(version),
            prerelease=version.is_prerelease,
            files=files_text(files),
            cann=cann,
            cann_source=source,
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, sorted(wanted)))


def _one_line_per_change(lines: List[str]) -> List[str]:
    """compare_rows says each difference per architecture; one said identically for both is said once."""
    out: List[str] = []
    for line in lines:
        arch, sep, rest = line.partition(": ")
        if sep and arch in ARCHES and all(f"{a}: {rest}" in lines for a in ARCHES):
            line = rest
        if line not in out:
            out.append(line)
    return out


def newer_releases(
    matrix: Matrix,
    row: Row,
    mirror: List[str],
    *,
    pre: bool,
    reader: Optional[MetadataReader] = None,
    pool: Optional[Dict[str, Any]] = None,
) -> List[Release]:
    """The plugin's releases newer than the row's pin that are for the row's CANN (finals and post releases;
    pre-releases too with `pre`), each with what differs from the row."""
    reader = reader or MetadataReader()
    pool = {} if pool is None else pool
    versions = plugin_files(IndexSet(mirror, pool=pool))
    pin = row.pin(PLUGIN)
    wanted = [v for v in versions if v > pin and (pre or not v.is_prerelease)]
    found = []
    for release in _released(matrix, versions, wanted, reader):
        if release.cann != row.cann:
            continue
        derived = derive_row(matrix, release.version, row.cann, mirror, reader=reader, pool=pool)
        changes = [d for d in compare_rows(row, derived) if not d.split(": ", 1)[-1].startswith(f"{PLUGIN} is ")]
        if derived.row["python"] != row.python:
            changes.insert(0, f"python is {row.python} in the matrix, {derived.row['python']} for this release")
        release.differs = _one_line_per_change(changes)
        release.not_verified = derived.problems
        found.append(release)
    return found


def releases_for_cann(
    matrix: Matrix, cann: str, mirror: List[str], reader: Optional[MetadataReader] = None
) -> List[Release]:
    """The plugin's releases the index has for `cann`, as far as it can tell: those newer than the oldest pin of
    the matrix (older ones predate the CANN releases it knows)."""
    reader = reader or MetadataReader()
    versions = plugin_files(IndexSet(mirror))
    oldest = min(row.pin(PLUGIN) for row in matrix.rows.values())
    return [r for r in _released(matrix, versions, [v for v in versions if v > oldest], reader) if r.cann == cann]
