"""The reachability gate: before any package step, every index the row needs answers, in seconds,
and serves the versions it is needed for.

An unreachable extra index used to make pip retry it five times per package (a 3-second step took
200 s, silently). Here each index is asked once, all at the same time, under one hard deadline that
covers DNS too: the lookups run in daemon threads that are abandoned, never waited for, when the
deadline passes (a hanging getaddrinfo cannot be interrupted, only left behind).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ascend_setup.index.http import TLS_HINT, UNTRUSTED
from ascend_setup.index.simple import ProjectPage, SimpleIndex
from ascend_setup.utils.deadline import failure_text, run_until

GATE_SECONDS = 10.0


@dataclass
class IndexNeed:
    """One index (the mirror may come with the user's extra indexes) and the pins it must serve."""

    name: str
    urls: Sequence[str]
    pins: Mapping[str, str]  # package -> exact version


@dataclass
class IndexCheck:
    need: IndexNeed
    error: Optional[str] = None  # the index did not answer (DNS, refused, TLS, timeout, 5xx)
    missing: Dict[str, str] = field(default_factory=dict)  # package -> what the index has instead
    unanswered: Dict[str, str] = field(default_factory=dict)  # package -> why its page did not come
    #: Seconds until its last page (or failure) came; None when some page had not come by the deadline.
    seconds: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.missing and not self.unanswered

    def message(self) -> str:
        label = self.need.name if self.need.name == "mirror" else f"index {self.need.name!r}"
        where = ", ".join(self.need.urls)
        if self.error:
            wanted = ", ".join(f"{n}=={v}" for n, v in self.need.pins.items())
            return f"{label} ({where}) could not be reached: {self.error}; it is needed for {wanted}"
        return "; ".join(
            [
                f"{label} ({where}) did not answer for {n}=={self.need.pins[n]}: {why}"
                for n, why in self.unanswered.items()
            ]
            + [f"no index serves {n}=={self.need.pins[n]}: {label} ({where}) {has}" for n, has in self.missing.items()]
        )

    def hint(self) -> str:
        if any(UNTRUSTED in why for why in (self.error or "", *self.unanswered.values())):
            return TLS_HINT  # another mirror would not help where a proxy re-signs TLS: trusting its CA does
        if self.need.name == "mirror":
            return "check the network, or pass --index-url URL / --mirror URL for a reachable PyPI mirror"
        return f"pass --index {self.need.name}=URL for a mirror of it that this host can reach"


def _has(pages: Sequence[ProjectPage], version: str) -> bool:
    return any(str(f.version) == version or f.version.public == version for p in pages for f in p.files)


def _instead(pages: Sequence[ProjectPage], name: str) -> str:
    versions = sorted({f.version for p in pages for f in p.files}, reverse=True)
    return f"has only {', '.join(str(v) for v in versions[:5])}" if versions else f"has no {name}"


def check_indexes(
    needs: Sequence[IndexNeed], *, deadline: float = GATE_SECONDS, indexes: Optional[Dict[str, SimpleIndex]] = None
) -> List[IndexCheck]:
    """Ask every needed (index, package) page at once; whatever has not answered by `deadline` seconds
    is unreachable. `indexes` (url -> SimpleIndex) keeps the pages for the caller to reuse."""
    pool = indexes if indexes is not None else {}
    jobs = []
    for need in needs:
        for url in need.urls:
            index = pool.setdefault(url, SimpleIndex(url, timeout=deadline, attempts=1))
            jobs += [(index, name) for name in need.pins]
    start = time.monotonic()
    came: Dict[Tuple[str, str], float] = {}  # (index URL, project): seconds to its answer

    def ask(index: SimpleIndex, name: str) -> ProjectPage:
        try:
            return index.project(name)
        finally:
            came[(index.url, name)] = time.monotonic() - start

    answers = run_until([partial(ask, index, name) for index, name in jobs], start + deadline)
    results: Dict[Tuple[str, str], Union[ProjectPage, Exception]] = {
        (index.url, name): page for (index, name), page in zip(jobs, answers) if page is not None
    }
    checks = []
    for need in needs:
        keys = [(pool[url].url, name) for url in need.urls for name in need.pins]
        on_time = all(k in results and k in came for k in keys)  # a page that came after the deadline is not counted
        check = IndexCheck(need, seconds=max(came[k] for k in keys) if on_time else None)
        pages: Dict[str, List[ProjectPage]] = {n: [] for n in need.pins}
        errors: Dict[str, str] = {}
        for url in need.urls:
            index = pool[url]
            for name in need.pins:
                page = results.get((index.url, name))
                if page is None:
                    errors.setdefault(name, f"no answer within {deadline:.0f} s")
                elif isinstance(page, Exception):
                    errors.setdefault(name, failure_text(page))
                elif page.error:
                    errors.setdefault(
                        name,
                        page.error.replace(index.project_url(name), "").replace("could not be reached", "").strip(" ()")
                        or page.error,
                    )
                else:
                    pages[name].append(page)
        if errors and not any(pages.values()):
            check.error = next(iter(errors.values()))
        else:  # a page that never came is not a version the index lacks
            check.unanswered = {n: why for n, why in errors.items() if not pages[n]}
            check.missing = {
                n: _instead(p, n) for n, p in pages.items() if n not in check.unanswered and not _has(p, need.pins[n])
            }
        checks.append(check)
    return checks
