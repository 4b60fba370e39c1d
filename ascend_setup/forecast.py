"""`ascend-setup plan`: for a target that need not be this machine, wheel, source build or unavailable,
for every package the install will ask for, before anything is downloaded."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import List, Optional

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ascend_setup.deps.derive import Derived, derive, specifier_for, target_environment
from ascend_setup.index.choose import Choice, choose
from ascend_setup.index.http import IndexUnreachable
from ascend_setup.index.metadata import MetadataReader, content_length
from ascend_setup.index.simple import IndexFile, IndexSet
from ascend_setup.index.tags import Target
from ascend_setup.knowledge.builds import build_warnings
from ascend_setup.matrix.models import Row


@dataclass
class Forecast:
    target: Target
    indexes: List[str]
    choices: List[Choice]
    derived: List[Derived] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    @property
    def download_bytes(self) -> int:
        return sum(c.file.size or 0 for c in self.choices if c.file is not None)

    @property
    def unavailable(self) -> List[Choice]:
        return [c for c in self.choices if c.outcome == "unavailable"]

    def to_json(self) -> dict:
        return {"target": self.target.to_json(), "indexes": self.indexes,
                "packages": [c.to_json() for c in self.choices], "download_bytes": self.download_bytes,
                "warnings": self.warnings}


def _metadata_file(choice: Choice, pages_files: List[IndexFile]) -> Optional[IndexFile]:
    """The chosen file, else any file of the pinned version (metadata is the same across wheels)."""
    if choice.file is not None:
        return choice.file
    same = [f for f in pages_files if choice.version is None or str(f.version) == choice.version]
    return next((f for f in same if f.kind == "wheel"), same[0] if same else None)


def _requires(reader: MetadataReader, f: Optional[IndexFile], warnings: List[str], what: str) -> List[str]:
    if f is None:
        warnings.append(f"{what}: no file to read requirements from; its dependencies are not forecast")
        return []
    try:
        return reader.requires(f)
    except (IndexUnreachable, KeyError, StopIteration, OSError, ValueError) as exc:
        warnings.append(f"{what}: could not read metadata of {f.filename} ({exc})")
        return []


def closure_names(row: Row, derived: List[Derived]) -> List[str]:
    """Row pins, the CANN compiler's Python deps, and every derived requirement kept or installed elsewhere."""
    names = list(row.packages) + list(row.cann_python_deps)
    names += [d.name for d in derived if d.included or d.name in row.packages]
    return list(dict.fromkeys(canonicalize_name(n) for n in names))


def forecast(row: Row, target: Target, indexes: IndexSet, reader: Optional[MetadataReader] = None) -> Forecast:
    reader = reader or MetadataReader()
    warnings: List[str] = []
    pages = indexes.prefetch(["vllm", "vllm-ascend"])
    heads = {n: choose(n, pages[n], SpecifierSet(f"=={row.packages[n]}"), target) for n in ("vllm", "vllm-ascend")}
    files = {n: [f for p in pages[n] for f in p.files if str(f.version) == row.packages[n]] for n in heads}
    with ThreadPoolExecutor(max_workers=2) as pool:
        vllm_req, plugin_req = pool.map(
            lambda n: _requires(reader, _metadata_file(heads[n], files[n]), warnings, f"{n} {row.packages[n]}"),
            ["vllm", "vllm-ascend"])
    derived = derive(row, vllm_req, plugin_req, target_environment(target))
    names = closure_names(row, derived)
    all_pages = indexes.prefetch(names)
    choices = [choose(n, all_pages[n], specifier_for(row, n, derived), target) for n in names]
    _fill_sizes(choices)
    sdists = [c.name for c in choices if c.outcome == "sdist"]
    warnings += build_warnings(sdists, target.glibc_tuple, row.build_minutes)
    for index_url in indexes.urls:
        errors = {p.error for ps in all_pages.values() for p in ps if p.index == index_url and p.error}
        if errors:
            warnings.append(f"index {index_url} could not be used: {sorted(errors)[0]}")
    return Forecast(target=target, indexes=indexes.urls, choices=choices, derived=derived, warnings=warnings)


def _fill_sizes(choices: List[Choice]) -> None:
    """HTML indexes give no sizes: ask the file servers (one tiny Range request each, concurrently)."""
    missing = [c for c in choices if c.file is not None and c.file.size is None and not c.file.url.startswith("file:")]
    if not missing:
        return

    def size_of(c: Choice) -> Optional[int]:
        try:
            return content_length(c.file.url)  # type: ignore[union-attr]
        except IndexUnreachable:
            return None

    with ThreadPoolExecutor(max_workers=16) as pool:
        sizes = list(pool.map(size_of, missing))
    for c, size in zip(missing, sizes):
        if size is not None and c.file is not None:
            c.file = replace(c.file, size=size)
