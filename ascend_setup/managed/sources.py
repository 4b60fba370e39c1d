"""Which mirrors have the exact pinned file: each asked with HEAD, all at once, each within a bound.

A mirror may lack the pinned build (one that keeps only the newest release answers 404), send an HTML
page, or not answer at all from where the host is; asking for the exact file, in parallel, tells which to
download from in one round trip's time, before a byte is fetched."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import List, Optional, Sequence

import requests

from ascend_setup.index.http import network_cause, session

#: Seconds one mirror gets to answer the HEAD (a mirror that slow would not be the one to download from).
PROBE_SECONDS = 5.0
PROBES_AT_ONCE = 8


@dataclass(frozen=True)
class Probe:
    url: str
    size: Optional[int]  # Content-Length when the mirror gives one
    problem: str  # "" when the mirror has the file

    @property
    def ok(self) -> bool:
        return not self.problem


def probe_file(url: str, timeout: float = PROBE_SECONDS) -> Probe:
    """HEAD the exact file, following redirects (the release host sends its files from another)."""
    try:
        response = session().head(url, timeout=timeout, allow_redirects=True)
    except requests.exceptions.SSLError:
        return Probe(url, None, "its certificate is not trusted (TLS)")
    except requests.RequestException as exc:
        return Probe(url, None, network_cause(exc, timeout))
    if response.status_code != 200:
        return Probe(url, None, f"HTTP {response.status_code}")
    kind = response.headers.get("Content-Type", "")
    if kind.startswith("text/html"):  # a proxy's or a mirror's page, not the archive
        return Probe(url, None, f"an HTML page ({kind}), not the archive")
    length = response.headers.get("Content-Length", "")
    return Probe(url, int(length) if length.isdigit() else None, "")


def probe_all(urls: Sequence[str], timeout: float = PROBE_SECONDS) -> List[Probe]:
    """Every URL asked at once; the answers in the order given (the order of preference)."""
    if not urls:
        return []
    with ThreadPoolExecutor(max_workers=min(PROBES_AT_ONCE, len(urls))) as pool:
        return list(pool.map(lambda u: probe_file(u, timeout), urls))
