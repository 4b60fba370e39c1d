"""The index session of one command: every page it reads from the indexes (the gates, the Python choice, the
closure, plan's forecast) fetched once, with the uv, the caches and pip's settings the resolution uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from ascend_setup.dists.installers import uv_command
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.reach import GATE_SECONDS, IndexCheck
from ascend_setup.index.simple import IndexPool, SharedPages
from ascend_setup.index.tags import Target
from ascend_setup.matrix.models import Row
from ascend_setup.resolve.closure import IndexSources, gate, resolve_closure
from ascend_setup.resolve.lockfile import Lock
from ascend_setup.resolve.requirement_set import Derived
from ascend_setup.utils.paths import cache_dir


@dataclass
class IndexSession:
    """One command's view of the indexes. `pages` is where a second source of the same files (an offline
    bundle) goes: `SharedPages(sources={url: source})` answers for that URL instead of the network."""

    settings: PipSettings
    pages: SharedPages = field(default_factory=SharedPages)
    cache: Path = field(default_factory=lambda: cache_dir() / "uv")
    _uv: Optional[Sequence[str]] = field(default=None, repr=False)

    def pool(self) -> IndexPool:
        """The indexes for one consumer (its deadline and its view of an index that is down are its own)."""
        return IndexPool(self.pages)

    @property
    def uv(self) -> Sequence[str]:
        if self._uv is None:
            self._uv = uv_command()
        return self._uv

    def gate(self, row: Row, sources: IndexSources, *, deadline: float = GATE_SECONDS) -> List[IndexCheck]:
        return gate(row, sources, deadline=deadline, pool=self.pool())

    def resolve(
        self,
        row: Row,
        target: Target,
        sources: IndexSources,
        *,
        checks: Optional[List[IndexCheck]] = None,
        on_derived: Optional[Callable[[List[Derived]], None]] = None,
        build_python: Optional[str] = None,
        device: Optional[str] = None,
    ) -> Lock:
        """`resolve_closure` with this session's pages, uv, cache and pip settings."""
        return resolve_closure(
            row,
            target,
            sources,
            settings=self.settings,
            uv=self.uv,
            cache_dir=self.cache,
            pool=self.pool(),
            checks=checks,
            on_derived=on_derived,
            build_python=build_python,
            device=device,
        )
