"""Rank package mirrors: a concurrent freshness gate, then a fair throughput measurement.

How mirrors share the link: freshness pages and a one-byte time-to-first-byte probe go out to every
mirror at once (tiny requests: the link is never the bottleneck, so concurrency is free). Throughput
is then measured one mirror at a time in short windows, fastest responders first: measured
concurrently, mirrors would split this host's downlink and a fast mirror would look as slow as its
neighbours. Each mirror is measured over as many connections as the install's downloads open to one
host (index.download.PER_HOST), each its own part of the sample: a mirror that caps every connection
fills more of the line with several, and the rate reported is the one the install can reach. A mirror
that is clearly slower than the best so far is cut off early, each window is capped, and the whole
measurement stays inside an overall budget.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlparse

import requests
from packaging.specifiers import SpecifierSet
from urllib3.exceptions import ReadTimeoutError

from ascend_setup.index.choose import choose
from ascend_setup.index.dnscache import keep_answers
from ascend_setup.index.download import PER_HOST
from ascend_setup.index.http import session
from ascend_setup.index.simple import IndexFile, ProjectPage, SimpleIndex
from ascend_setup.index.tags import Target
from ascend_setup.matrix.models import MIRROR, Row
from ascend_setup.utils.deadline import Calls, failure_text, run_until

SAMPLE_BYTES = 16 * 1024 * 1024
#: Of the budget: project pages (DNS and connect included) by 40 %, first bytes by 60 %, throughput after.
#: A mirror that misses them but answers within the budget is ranked "slow" (its late phase named), not dropped.
PAGES_SHARE, FIRST_BYTE_SHARE = 0.4, 0.6
#: Each phase of the first contact has a deadline of its own, so that a late answer says which part was late
#: (a resolver that retries after 5 s is not a slow mirror's fault, and is not a dead mirror either).
DNS_WITHIN, CONNECT_WITHIN = 1.0, 1.0
FIRST_BYTE_TIMEOUT = 2.0
SLOW_FRACTION = 0.25  # below a quarter of the best: "slow"
EARLY_ABORT_AFTER = 0.3  # seconds of transfer before a clearly slower mirror is cut off
#: Throughput is measured over as many connections as the install's own downloads open to one host: a mirror
#: may cap each connection well below the line, and the floor the install is held to is the line's rate.
CONNECTIONS = PER_HOST
MIN_PART = 256 * 1024  # no connection measures less than this (a small sample goes over fewer connections)
CHUNK = 16 * 1024  # small enough that a connection sees the stop within a moment even at a crawl
POLL = 0.02


@dataclass
class MirrorResult:
    url: str
    status: str = "ok"  # ok | stale | error | timeout | slow
    ttfb_s: Optional[float] = None
    throughput_bps: Optional[float] = None
    detail: str = ""
    missing: List[str] = field(default_factory=list)
    sample_url: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        data.pop("missing")
        data.pop("sample_url")
        return data


@dataclass
class Ranking:
    mirrors: List[MirrorResult]
    chosen: Optional[str]
    sample: Optional[str]
    seconds: float

    def usable(self) -> List[MirrorResult]:
        """Fresh and answering mirrors, fastest first; one not measured for lack of time ranks by first byte.
        Only when none is ok, the slow ones (late or crawling): an index that answers beats none at all."""
        ok = [m for m in self.mirrors if m.status == "ok"] or [m for m in self.mirrors if m.status == "slow"]
        return sorted(ok, key=lambda m: (-(m.throughput_bps or 0), m.ttfb_s or 99))

    def to_json(self) -> Dict[str, Any]:
        return {
            "mirrors": [m.to_json() for m in self.mirrors],
            "chosen": self.chosen,
            "sample": self.sample,
            "seconds": round(self.seconds, 3),
        }


def gated_packages(row: Row) -> Dict[str, str]:
    """The row's pins that come from a PyPI mirror (not from a named index such as Ascend's)."""
    return {n: v for n, v in row.packages.items() if row.index_of(n) == MIRROR}


def _pages(url: str, names: Sequence[str], timeout: float) -> Optional[Dict[str, ProjectPage]]:
    """The pinned projects' pages of one mirror, or None when they did not all come within `timeout` (a
    page that could not be read at all raises its cause)."""
    index = SimpleIndex(url, timeout=timeout, attempts=1)
    pages = run_until([partial(index.project, n) for n in names], time.monotonic() + timeout)
    failed = next((p for p in pages if isinstance(p, Exception)), None)
    if failed is not None:
        raise failed
    answered = [p for p in pages if isinstance(p, ProjectPage)]  # the others: None, not come within `timeout`
    return dict(zip(names, answered)) if len(answered) == len(pages) else None


@dataclass
class Contact:
    """One mirror's first contact, phase by phase (written by its thread, read at the deadlines)."""

    phase: str = "DNS"
    dns_s: Optional[float] = None
    connect_s: Optional[float] = None
    pages_s: Optional[float] = None

    def late(self) -> str:
        """Which phases missed their deadline, for a late answer's detail."""
        parts = [
            f"DNS took {self.dns_s:.1f} s" if (self.dns_s or 0) > DNS_WITHIN else "",
            f"connect took {self.connect_s:.1f} s" if (self.connect_s or 0) > CONNECT_WITHIN else "",
        ]
        return ", ".join(p for p in parts if p) or f"its pages took {self.pages_s or 0:.1f} s"

    def stuck(self, within: float) -> str:
        return {
            "DNS": f"DNS: no answer within {within:.1f} s",
            "connect": f"connect: no answer within {within:.1f} s",
        }.get(self.phase, f"connected, but no pages within {within:.1f} s")


def _contact(url: str, names: Sequence[str], contact: Contact, end: float) -> Optional[Dict[str, ProjectPage]]:
    """DNS, a TCP connect, then the pages, each phase timed; it may finish after the on-time deadline."""
    start = time.monotonic()
    parts = urlparse(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            address = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)[0][4]
            contact.dns_s, contact.phase = time.monotonic() - start, "connect"
            host, at = address[0], address[1]
            assert isinstance(host, str) and isinstance(at, int)  # an AF_INET(6) address: (host, port, ...)
            with socket.create_connection((host, at), timeout=max(0.1, end - time.monotonic())):
                pass
            contact.connect_s = time.monotonic() - start - contact.dns_s
        except OSError:
            pass  # the page fetch below meets the same failure, and names it as every index error is named
    contact.phase = "pages"
    pages = _pages(url, names, max(0.1, end - time.monotonic()))
    contact.pages_s = time.monotonic() - start
    return pages


def freshness(results: List[MirrorResult], pages: Dict[str, Dict[str, ProjectPage]], pins: Dict[str, str]) -> None:
    """A mirror lacking a pinned version that some other mirror serves is stale."""

    def has(page: ProjectPage, version: str) -> bool:
        return any(str(f.version) == version for f in page.files)

    for result in results:
        errors = [p.error for p in pages[result.url].values() if p.error]
        if errors:
            result.status, result.detail = "error", errors[0]
    served = {name: any(has(pages[r.url][name], v) for r in results if r.status != "error") for name, v in pins.items()}
    for result in results:
        if result.status == "error":
            continue
        result.missing = [f"{n}=={v}" for n, v in pins.items() if served[n] and not has(pages[result.url][n], v)]
        if result.missing:
            result.status, result.detail = "stale", "lacks " + ", ".join(result.missing)


def sample_file(
    row: Row, target: Target, pages: Dict[str, Dict[str, ProjectPage]], results: List[MirrorResult]
) -> Optional[IndexFile]:
    """The largest file of the row that the install downloads anyway, resolved for the target; else (no
    file of the row for that Python) the row's largest file of any tag, which measures a mirror as well."""
    best: Optional[IndexFile] = None
    fresh = [r for r in results if r.status == "ok"]
    for name, version in gated_packages(row).items():
        for r in fresh:
            choice = choose(name, [pages[r.url][name]], SpecifierSet(f"=={version}"), target)
            if choice.file is not None and (best is None or (choice.file.size or 0) > (best.size or 0)):
                best = choice.file
            if choice.file is not None:
                break
    if best is None and fresh:
        pinned = [
            f
            for name, version in gated_packages(row).items()
            for f in pages[fresh[0].url][name].files
            if str(f.version) == version
        ]
        best = max(pinned, key=lambda f: f.size or 0, default=None)
    return best


def _locate(sample: IndexFile, pages: Dict[str, ProjectPage]) -> Optional[str]:
    page = pages.get(sample.name)
    return next((f.url for f in page.files if f.filename == sample.filename), None) if page else None


def _timed_out(exc: requests.RequestException) -> bool:
    """requests reports a read timeout inside a streamed body as a ConnectionError wrapping urllib3's."""
    return isinstance(exc, requests.Timeout) or any(isinstance(a, ReadTimeoutError) for a in exc.args)


def _first_byte_by(url: Optional[str], end: float) -> Tuple[str, str, Optional[float]]:
    """first_byte(url) with what is left until `end` when the call starts (in its own thread) as its timeout."""
    assert url is not None  # a probed mirror has its sample's URL
    return first_byte(url, max(0.1, end - time.monotonic()))


def first_byte(url: str, timeout: float = FIRST_BYTE_TIMEOUT) -> Tuple[str, str, Optional[float]]:
    """(status, detail, seconds) of the first byte of the sample; errors, 404s and silent servers are decided
    here. It returns rather than records: a probe left behind at the deadline must not change a result later."""
    start = time.monotonic()
    try:
        with session().get(url, headers={"Range": "bytes=0-0"}, stream=True, timeout=(timeout, timeout)) as response:
            if response.status_code not in (200, 206):
                return "error", f"HTTP {response.status_code} for the sample file", None
            next(response.iter_content(1), b"")
            return "ok", "", round(time.monotonic() - start, 4)
    except requests.RequestException as exc:
        if _timed_out(exc):
            return "timeout", f"no first byte within {timeout:.1f} s", None
        return "error", f"{exc.__class__.__name__} fetching the sample", None


class _Meter:
    """The bytes every connection of one measurement has counted, shared by their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.got = 0
        self.first: Optional[float] = None
        self.error: Optional[str] = None
        self.timed_out = False

    def add(self, n: int) -> None:
        with self.lock:
            now = time.monotonic()
            if self.first is None:
                self.first = now  # the clock starts at the first byte: the first chunk is latency, not rate
            else:
                self.got += n

    def snapshot(self) -> Tuple[int, float]:
        with self.lock:
            return self.got, (time.monotonic() - self.first) if self.first is not None else 0.0


def _stream(url: str, lo: int, hi: int, meter: _Meter, timeout: float) -> None:
    """Bytes lo..hi of the sample over this thread's own connection, counted into `meter` until it stops."""
    try:
        with session().get(
            url, headers={"Range": f"bytes={lo}-{hi}"}, stream=True, timeout=(FIRST_BYTE_TIMEOUT, timeout)
        ) as response:
            if response.status_code == 416:
                return  # a range past the end of a sample smaller than asked for: nothing to count
            if response.status_code not in (200, 206):
                meter.error = f"HTTP {response.status_code}"
                meter.stop.set()
                return
            left = hi - lo + 1
            for chunk in response.iter_content(CHUNK):
                meter.add(len(chunk))
                left -= len(chunk)
                if left <= 0 or meter.stop.is_set():
                    return
    except requests.RequestException as exc:
        if _timed_out(exc):
            meter.timed_out = True
        else:
            meter.error = f"{exc.__class__.__name__} during the transfer"
            meter.stop.set()


def throughput(
    result: MirrorResult,
    *,
    window: float,
    best: float,
    sample_bytes: int = SAMPLE_BYTES,
    size: Optional[int] = None,
    connections: int = CONNECTIONS,
) -> None:
    """Bytes per second after the first byte, over `connections` connections at once (each its own part of
    the sample, as the install's downloads share a host), over at most `window` seconds; cut off early when
    clearly slower than `best`. `size`: the sample's size, when the index says it."""
    assert result.sample_url is not None  # measured only for a mirror whose first byte of the sample came
    total = min(sample_bytes, size) if size else sample_bytes
    connections = max(1, min(connections, total // MIN_PART or 1))
    part = -(-total // connections)
    meter = _Meter()
    threads = [
        threading.Thread(
            target=_stream,
            daemon=True,
            args=(result.sample_url, i * part, min(total, (i + 1) * part) - 1, meter, max(window, 0.5)),
        )
        for i in range(connections)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + FIRST_BYTE_TIMEOUT + max(window, 0.5)
    while any(t.is_alive() for t in threads) and not meter.stop.is_set():
        got, elapsed = meter.snapshot()
        if meter.first is None and time.monotonic() >= deadline:
            break
        if elapsed >= window or got >= total:
            break
        if best and elapsed >= EARLY_ABORT_AFTER and got / elapsed < best * SLOW_FRACTION:
            result.detail = "cut off early: clearly slower than the best"
            break
        time.sleep(POLL)
    got, elapsed = meter.snapshot()
    meter.stop.set()  # the connections still reading end at their next chunk (or their read timeout)
    if meter.error is not None:
        result.status, result.detail = "error", meter.error
        return
    if not got and meter.timed_out:
        result.status, result.detail = "timeout", "the transfer stalled"
        return
    result.throughput_bps = round(got / elapsed, 1) if elapsed > 0 and got else 0.0


def rank_mirrors(
    urls: Sequence[str],
    row: Row,
    target: Target,
    *,
    budget: float = 5.0,
    window_cap: float = 1.5,
    first: Optional[str] = None,
    on_result: Optional[Callable[[MirrorResult], None]] = None,
) -> Ranking:
    """Rank within `budget` seconds of wall clock, DNS and connect included. `first` (pip's configured index)
    is measured first; a mirror that answered is never dropped for lack of time (it is ranked by its first
    byte instead). `on_result` hears of each mirror as soon as it is decided."""
    keep_answers()  # every page and probe below reuses the first lookup of its host
    start = time.monotonic()
    end = start + budget
    urls = list(dict.fromkeys(u if u.endswith("/") else u + "/" for u in urls))
    first = (first if first.endswith("/") else first + "/") if first else None
    results = [MirrorResult(url=u) for u in urls]
    pins = gated_packages(row)
    pages_within = budget * PAGES_SHARE
    contacts = [Contact() for _ in urls]
    pending = Calls([partial(_contact, u, list(pins), c, end) for u, c in zip(urls, contacts)])
    answers = pending.results(start + pages_within)
    pages: Dict[str, Dict[str, ProjectPage]] = {}
    late: List[MirrorResult] = []
    for r, a in zip(results, answers):
        if isinstance(a, dict):
            pages[r.url] = a
        elif isinstance(a, Exception):
            r.status, r.detail = "error", failure_text(a)
        else:
            late.append(r)  # decided at the end: late, or no answer at all
    freshness([r for r in results if r.url in pages], pages, pins)
    sample = sample_file(row, target, pages, [r for r in results if r.url in pages])
    fresh = [r for r in results if r.status == "ok" and r.url in pages]
    if sample is None and pages:
        for r in fresh:
            r.status, r.detail = "error", "no file of the row to measure"
        fresh = []
    for r in fresh:
        r.sample_url = _locate(sample, pages[r.url]) if sample else None
        if r.sample_url is None:
            r.status, r.detail = "stale", f"lacks {sample.filename}" if sample else "lacks the sample"
    for r in results:
        if r.status != "ok" and on_result:
            on_result(r)
    probing = [r for r in fresh if r.status == "ok"]
    probe_within = max(0.1, min(FIRST_BYTE_TIMEOUT, start + budget * FIRST_BYTE_SHARE - time.monotonic()))
    probe_calls = Calls([partial(_first_byte_by, r.sample_url, end) for r in probing])
    probes = probe_calls.results(time.monotonic() + probe_within)
    slow_first_byte = []
    for r, probe in zip(probing, probes):
        if probe is None:
            slow_first_byte.append(r)
            continue
        r.status, r.detail, r.ttfb_s = ("error", failure_text(probe), None) if isinstance(probe, Exception) else probe
        if r.status != "ok" and on_result:
            on_result(r)
    answered = sorted(
        (r for r in probing if r.status == "ok" and r not in slow_first_byte),
        key=lambda r: (r.url != first, r.ttfb_s or 0),
    )
    best = 0.0
    for i, r in enumerate(answered):
        left = end - time.monotonic()
        if left <= 0.05:
            r.detail = "answered; no time left to measure throughput (ranked by its first byte)"
        else:
            throughput(
                r, window=min(window_cap, left / (len(answered) - i)), best=best, size=sample.size if sample else None
            )
            if r.status == "ok":
                best = max(best, r.throughput_bps or 0)
        if on_result:
            on_result(r)
    for r in answered:
        if r.status == "ok" and best and r.throughput_bps is not None and r.throughput_bps < best * SLOW_FRACTION:
            r.status = "slow"
            r.detail = r.detail or f"{r.throughput_bps / 1e3:.0f} kB/s, under a quarter of the best"
    for r, probe in zip(probing, probe_calls.results(end)):
        if r in slow_first_byte:
            r.status, r.detail, r.ttfb_s = _late_first_byte(probe, probe_within)
    sample = _late_pages(late, pending.results(end), urls, contacts, pages, pins, row, target, sample, budget)
    for r in [*late, *slow_first_byte]:
        if on_result:
            on_result(r)
    return _finish(results, sample.filename if sample else None, start, None)


def _late_first_byte(
    probe: Optional[Union[Tuple[str, str, Optional[float]], Exception]], within: float
) -> Tuple[str, str, Optional[float]]:
    if isinstance(probe, Exception):
        return "error", failure_text(probe), None
    if probe is None:
        return "timeout", f"no first byte of the sample within the budget ({within:.1f} s expected)", None
    status, detail, seconds = probe
    if status != "ok":
        return status, detail, seconds
    return "slow", f"answered late: first byte of the sample after {seconds:.1f} s", seconds


def _late_pages(
    late: List[MirrorResult],
    answers: Sequence[Optional[Union[Dict[str, ProjectPage], Exception]]],
    urls: List[str],
    contacts: List[Contact],
    pages: Dict[str, Dict[str, ProjectPage]],
    pins: Dict[str, str],
    row: Row,
    target: Target,
    sample: Optional[IndexFile],
    budget: float,
) -> Optional[IndexFile]:
    """The mirrors that missed the pages deadline: those that answered within the budget are ranked "slow"
    (fresh ones) or stale; the others time out, naming the phase they were stuck in. Returns the sample."""
    by_url = dict(zip(urls, zip(answers, contacts)))
    came = []
    for r in late:
        answer, contact = by_url[r.url]
        if isinstance(answer, Exception):
            r.status, r.detail = "error", failure_text(answer)
        elif isinstance(answer, dict):
            pages[r.url] = answer
            came.append((r, contact))
        else:
            r.status, r.detail = "timeout", contact.stuck(budget)
    if not came:
        return sample
    freshness([m for m, _ in came], pages, pins)
    if sample is None:
        sample = sample_file(row, target, pages, [m for m, _ in came])
    for r, contact in came:
        if r.status == "ok":
            r.status, r.detail = "slow", f"answered late ({contact.late()}); not measured"
            r.ttfb_s = round(contact.pages_s or 0, 4)
    return sample


def _finish(
    results: List[MirrorResult],
    sample: Optional[str],
    start: float,
    on_result: Optional[Callable[[MirrorResult], None]],
) -> Ranking:
    ranking = Ranking(results, None, sample, time.monotonic() - start)
    usable = ranking.usable()
    ranking.chosen = usable[0].url if usable else None
    order = {"ok": 0, "slow": 1, "stale": 2, "timeout": 3, "error": 4}
    ranking.mirrors.sort(key=lambda m: (order[m.status], -(m.throughput_bps or 0), m.ttfb_s or 99))
    if on_result:
        for r in results:
            on_result(r)
    return ranking
