"""Which mirrors to measure, the cached result, and the choice the install's mirror step uses."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.host.machine import this_machine
from ascend_setup.index.pipconfig import configured_index
from ascend_setup.index.tags import Target
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.mirrors.rank import MirrorResult, Ranking, rank_mirrors
from ascend_setup.utils.files import atomic_write_text, open_append, refuse_link
from ascend_setup.utils.inputs import Name, PathText, Prose, load_model

CACHE_NAME = "mirrors.json"
CACHE_TTL = 6 * 3600
#: Far more mirrors than any ranking measures (the well-known ones, pip's, and a few --candidate URLs).
MAX_MIRRORS = 1000
DAY = 86400.0  # longer than any ranking takes or any first byte is waited for


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class CachedMirror(_Record):
    """One mirror's measurement as MirrorResult.to_json wrote it."""

    url: PathText
    status: Name
    ttfb_s: Optional[float] = Field(default=None, ge=0, le=DAY)
    throughput_bps: Optional[float] = Field(default=None, ge=0, le=1e13)  # 10 TB/s: no link measures more
    detail: Prose = ""


class CachedResult(_Record):
    mirrors: List[CachedMirror] = Field(max_length=MAX_MIRRORS)
    chosen: Optional[PathText] = None
    sample: Optional[PathText] = None
    seconds: float = Field(ge=0, le=DAY)


class CachedRanking(_Record):
    """mirrors.json, as ranking_record writes it. A file of another shape is a damaged cache: measured again,
    never a traceback in the install's mirror step."""

    key: Dict[str, Any]
    time: float
    result: CachedResult
    fallbacks: List[PathText] = Field(default_factory=list, max_length=MAX_MIRRORS)


def candidates(matrix: Matrix, extra: Sequence[str] = (), only: bool = False) -> List[str]:
    """pip's configured index first (it is measured first), the well-known mirrors (matrix data), and
    --candidate URLs."""
    if only:
        return list(dict.fromkeys(extra))
    try:
        configured = [configured_index()]
    except AscendSetupError:
        configured = []
    return list(dict.fromkeys([*configured, *matrix.well_known_mirrors, *extra]))


def _cache_key(row: Row, target: Target, urls: Sequence[str]) -> Dict[str, Any]:
    """What a ranking depends on. Not the Python: a mirror's speed and freshness are the same for every
    interpreter, so `mirrors` and `install` (whatever Python each targets) share one ranking."""
    return {"row": row.cann, "arch": target.arch, "glibc": target.glibc, "candidates": sorted(urls)}


def load_cached(
    workdir: Path, row: Row, target: Target, urls: Sequence[str], ttl: float = CACHE_TTL
) -> Optional[Dict[str, Any]]:
    """A previous ranking for the same row, target and candidates, if younger than `ttl`."""
    path = workdir / CACHE_NAME
    refuse_link(path)  # a link or a FIFO in the cache's place is someone else's: exit 2 naming it
    if not path.exists():
        return None
    try:
        cached = load_model(path, "mirrors", CachedRanking, follow=False)
    except BadInput:
        return None  # a damaged ranking is measured again
    if cached.key != _cache_key(row, target, urls) or not 0 <= time.time() - cached.time <= ttl:
        return None  # another question's, stale, or from the future (a clock set back): measured again
    return cached.model_dump()


def ranking_record(row: Row, target: Target, urls: Sequence[str], ranking: Ranking) -> Dict[str, Any]:
    return {
        "key": _cache_key(row, target, urls),
        "time": time.time(),
        "result": ranking.to_json(),
        "fallbacks": [m.url for m in ranking.usable()[1:]],
    }


def save_cache(workdir: Path, data: Dict[str, Any]) -> None:
    """Keep a ranking that chose a mirror (a failed one is never kept: the next run measures again). The workdir
    is made when its parent is there; a missing parent (a default /mnt/workspace this host lacks) is not made."""
    try:
        workdir.mkdir(exist_ok=True)
        atomic_write_text(workdir / CACHE_NAME, json.dumps(data, indent=2) + "\n")
    except OSError:
        pass  # a read-only workdir: the ranking is shown, just not remembered


def ranked(
    matrix: Matrix,
    row: Row,
    workdir: Path,
    *,
    target: Target,
    urls: Sequence[str],
    budget: float = 5.0,
    use_cache: bool = True,
    first: Optional[str] = None,
    on_result: Optional[Callable[[MirrorResult], None]] = None,
) -> Tuple[Dict[str, Any], bool]:
    """(the ranking as JSON plus fallbacks, whether it came from the cache). `first` is measured first."""
    if use_cache:
        cached = load_cached(workdir, row, target, urls)
        if cached is not None:
            return cached, True
    ranking = rank_mirrors(urls, row, target, budget=budget, first=first, on_result=on_result)
    data = ranking_record(row, target, urls, ranking)
    if ranking.chosen:
        save_cache(workdir, data)
    return data, False


def choose_for_install(matrix: Matrix, row: Row, workdir: Path, python: str, log: Path) -> Tuple[str, str, List[str]]:
    """The install's `--mirror auto` for this machine with Python `python` (X.Y): reuse a fresh ranking from
    the workdir, else measure now. Returns the chosen index, why, and the other usable mirrors (for download
    fail-over)."""
    target = this_machine(python)
    urls = candidates(matrix)
    data, cached = ranked(matrix, row, workdir, target=target, urls=urls, first=urls[0] if urls else None)
    with open_append(log) as handle:
        for m in data["result"]["mirrors"]:
            handle.write(f"  {m['status']:<8} {m['url']}  ttfb={m['ttfb_s']} bps={m['throughput_bps']} {m['detail']}\n")
    chosen = data["result"]["chosen"]
    if not chosen:
        raise AscendSetupError(
            "no usable package mirror (all stale, unreachable or failing)",
            hint="pass --index-url URL or --mirror URL; see 'ascend-setup mirrors'",
        )
    return chosen, "fastest fresh mirror" + (" (cached ranking)" if cached else ""), data.get("fallbacks", [])
