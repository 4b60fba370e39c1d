"""Downloads that survive a stop: `.part` files, HTTP Range resume, sha256 from the index, rename when
complete, and fail-over to the next mirror (continuing from the same byte) when one stalls.

Files the tool fetches itself go several at a time (`each`), where pip would fetch them one after another:
over a mirror 100-300 ms away the round trips add up, and one connection may not fill the line. Every
download in the process shares one bound per host, so no caller can open more than PER_HOST connections
to a mirror whatever its own parallelism; each file keeps its own `.part`, so a kill resumes each from
its own byte."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, TypeVar
from urllib.parse import urlsplit

import requests

from ascend_setup.errors import AscendSetupError
from ascend_setup.index.http import IndexUnreachable, get
from ascend_setup.utils.diskfull import disk_full, is_enospc
from ascend_setup.utils.files import fsync_dir, make_dir, open_binary, refuse_link

CHUNK = 256 * 1024
Progress = Callable[[int, Optional[int]], None]
#: Connections to one host (and port) at once: enough to fill a line one connection cannot, few enough for
#: a mirror's per-client limits.
PER_HOST = 4
#: Files `each` fetches at once, over all hosts (each host still gets at most PER_HOST of them).
FILES_AT_ONCE = 8

T = TypeVar("T")
R = TypeVar("R")
_slots: Dict[str, threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()


def _host_slot(url: str) -> threading.BoundedSemaphore:
    """The semaphore every download from `url`'s host shares."""
    host = urlsplit(url).netloc.lower()
    with _slots_lock:
        return _slots.setdefault(host, threading.BoundedSemaphore(PER_HOST))


def each(fetch: Callable[[T], R], items: Sequence[T]) -> List[R]:
    """`fetch` of every item, FILES_AT_ONCE at a time, the results in order. Every fetch runs to its end
    before the first error is raised, so what the others fetched is kept for the next run."""
    if len(items) <= 1:
        return [fetch(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(FILES_AT_ONCE, len(items))) as pool:
        futures = [pool.submit(fetch, item) for item in items]
    return [f.result() for f in futures]


class Stalled(AscendSetupError):
    """A mirror sends too slowly (or nothing at all); the next one continues the same file."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(got: Path, name: str, sha256: Optional[str], parts: Sequence[Path] = ()) -> None:
    """Refuse a fetched file that is not the one asked for, removing it (and the parts it was joined from):
    ours, and worthless, so the next attempt starts clean."""
    if sha256 is None:
        return
    actual = sha256_of(got)
    if actual != sha256:
        for p in [got, *parts]:
            p.unlink(missing_ok=True)
        raise AscendSetupError(
            f"{name}: the file served has sha256 {actual}, which does not match the expected {sha256}",
            hint="the mirror serves a different file; try another",
        )


class TooBig(Stalled):
    """A server sent more bytes than the file's known size: not the file asked for (and, unbounded, a disk
    and a day filled with it)."""


def _fetch(
    url: str,
    part: Path,
    *,
    total: Optional[int],
    most: Optional[int],
    on_progress: Optional[Progress],
    stall_seconds: float,
    min_rate: float,
    window: float,
) -> None:
    offset = part.stat().st_size if part.exists() else 0
    if total is not None and offset >= total:
        return
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    with _host_slot(url):
        _transfer(
            url,
            part,
            offset,
            headers,
            total=total,
            most=most,
            on_progress=on_progress,
            stall_seconds=stall_seconds,
            min_rate=min_rate,
            window=window,
        )


def _bound(url: str, part: Path, done: int, most: Optional[int]) -> None:
    """Past `most` bytes the transfer stops and its `.part` goes (ours, and not the file asked for)."""
    if most is not None and done > most:
        part.unlink(missing_ok=True)
        raise TooBig(f"{url} sent more than the file's {most} bytes")


def _transfer(
    url: str,
    part: Path,
    offset: int,
    headers: Dict[str, str],
    *,
    total: Optional[int],
    most: Optional[int],
    on_progress: Optional[Progress],
    stall_seconds: float,
    min_rate: float,
    window: float,
    ranged: bool = False,
) -> None:
    """`url` into `part` from `offset`; `most` bounds what `part` may reach (the size the pin or the answer
    gave), so a server that sends on is cut at the first chunk past it."""
    try:
        response = get(url, headers=headers, stream=True, timeout=stall_seconds, attempts=2)
    except IndexUnreachable as exc:
        raise Stalled(exc.message) from None
    with response:
        if response.status_code == 416:
            return
        if response.status_code not in (200, 206):
            raise Stalled(f"{url} answered HTTP {response.status_code}")
        if ranged and response.status_code != 206:
            raise NoRanges(f"{url} sent the whole file for a range")
        append = response.status_code == 206 and bool(offset)
        done = offset if append else 0
        window_start, window_bytes = time.monotonic(), 0
        with open_binary(part, append) as handle:
            try:
                for chunk in response.iter_content(CHUNK):
                    _bound(url, part, done + len(chunk), most)
                    handle.write(chunk)
                    done += len(chunk)
                    window_bytes += len(chunk)
                    if on_progress:
                        on_progress(done, total)
                    elapsed = time.monotonic() - window_start
                    if elapsed >= window:
                        if window_bytes / elapsed < min_rate:
                            raise Stalled(
                                f"{url} sends {window_bytes / elapsed / 1e3:.0f} kB/s, below {min_rate / 1e3:.0f} kB/s"
                            )
                        handle.flush()
                        os.fsync(handle.fileno())
                        window_start, window_bytes = time.monotonic(), 0
            except (
                requests.exceptions.ConnectionError,
                requests.exceptions.ChunkedEncodingError,
                requests.exceptions.Timeout,
            ) as exc:
                raise Stalled(f"{url}: transfer stopped ({exc.__class__.__name__})") from None
            handle.flush()
            os.fsync(handle.fileno())


def download(
    urls: Sequence[str],
    dest: Path,
    *,
    sha256: Optional[str] = None,
    size: Optional[int] = None,
    on_progress: Optional[Progress] = None,
    on_failover: Optional[Callable[[str, str], None]] = None,
    stall_seconds: float = 30.0,
    min_rate: float = 50_000.0,
    window: float = 5.0,
    most: Optional[int] = None,
) -> Path:
    """Fetch `dest` from the first URL that works, resuming `dest.part`; verify; rename. Idempotent. A server
    that sends more than `size` (else `most`, a bound for a file whose size nobody gave) fails over to the
    next URL."""
    refuse_link(dest)
    refuse_link(dest.with_name(dest.name + ".part"))
    if dest.exists() and (sha256 is None or sha256_of(dest) == sha256):
        return dest
    make_dir(dest.parent)
    part = dest.with_name(dest.name + ".part")
    errors: List[str] = []
    for url in urls:
        try:
            _fetch(
                url,
                part,
                total=size,
                most=size if size is not None else most,
                on_progress=on_progress,
                stall_seconds=stall_seconds,
                min_rate=min_rate,
                window=window,
            )
            break
        except Stalled as exc:
            errors.append(exc.message)
            if on_failover:
                on_failover(url, exc.message)
        except OSError as exc:  # what reached the disk stays in .part: the next run asks for the rest (Range)
            if is_enospc(exc):
                raise disk_full(part, f"downloading {dest.name}") from None
            raise
    else:
        raise AscendSetupError(
            f"could not download {dest.name}: " + "; ".join(errors),
            hint=f"run again to continue from byte {part.stat().st_size if part.exists() else 0}",
        )
    _verify(part, dest.name, sha256)
    os.replace(part, dest)
    fsync_dir(dest.parent)
    return dest


class NoRanges(Stalled):
    """The server sent the whole file where a part was asked for."""


#: A file at least this big is fetched in PER_HOST parts at once (`download_split`): one connection may be capped
#: well below the line, and the biggest file of a lock would otherwise outlast all the others.
SPLIT_ABOVE = 16 * 1024 * 1024


def _fetch_part(
    urls: Sequence[str], path: Path, lo: int, hi: int, *, stall_seconds: float, min_rate: float, window: float
) -> Optional[str]:
    """Bytes lo..hi of the file into `path`, resuming from what it holds; None when whole, else why not."""
    refuse_link(path)
    errors: List[str] = []
    for url in urls:
        have = path.stat().st_size if path.exists() else 0
        if have >= hi - lo + 1:
            return None
        with _host_slot(url):
            try:
                _transfer(
                    url,
                    path,
                    have,
                    {"Range": f"bytes={lo + have}-{hi}"},
                    total=None,
                    most=hi - lo + 1,
                    on_progress=None,
                    stall_seconds=stall_seconds,
                    min_rate=min_rate,
                    window=window,
                    ranged=True,
                )
            except Stalled as exc:
                if isinstance(exc, NoRanges):
                    raise
                errors.append(exc.message)
                continue
        if path.stat().st_size >= hi - lo + 1:
            return None
        errors.append(f"{url}: the part ended early")
    return "; ".join(errors) or "no URL"


def download_split(
    urls: Sequence[str],
    dest: Path,
    *,
    sha256: Optional[str],
    size: Optional[int],
    stall_seconds: float = 30.0,
    min_rate: float = 50_000.0,
    window: float = 5.0,
) -> Path:
    """`download` of a file of known `size` over PER_HOST connections at once, each its own range into its own
    `.partN` (resumed from its own byte after a stop), joined, verified and renamed; a server that does not
    serve ranges gets the plain `download`. Idempotent."""
    if not size or size < SPLIT_ABOVE:  # `download` checks a file already there itself
        return download(
            urls, dest, sha256=sha256, size=size, stall_seconds=stall_seconds, min_rate=min_rate, window=window
        )
    refuse_link(dest)
    if dest.exists() and (sha256 is None or sha256_of(dest) == sha256):
        return dest
    make_dir(dest.parent)
    count = PER_HOST
    step = -(-size // count)
    ranges = [(i * step, min(size, (i + 1) * step) - 1) for i in range(count)]
    parts = [dest.with_name(f"{dest.name}.part{i}") for i in range(count)]
    try:
        missing = each(
            lambda i: _fetch_part(
                urls, parts[i], *ranges[i], stall_seconds=stall_seconds, min_rate=min_rate, window=window
            ),
            list(range(count)),
        )
    except NoRanges:
        for p in parts:
            p.unlink(missing_ok=True)
        return download(
            urls, dest, sha256=sha256, size=size, stall_seconds=stall_seconds, min_rate=min_rate, window=window
        )
    except OSError as exc:
        if is_enospc(exc):
            raise disk_full(dest.parent, f"downloading {dest.name}") from None
        raise
    failed = [(i, why) for i, why in enumerate(missing) if why is not None]
    if failed:
        done = sum(p.stat().st_size for p in parts if p.exists())
        raise AscendSetupError(
            f"could not download {dest.name} (part {failed[0][0] + 1} of {count}): {failed[0][1]}",
            hint=f"run again to continue each part from its own byte ({done} of {size} bytes kept)",
        )
    whole = dest.with_name(dest.name + ".part")
    refuse_link(whole)
    try:
        with open_binary(whole, False) as out:
            for p in parts:
                with p.open("rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        if is_enospc(exc):
            raise disk_full(whole, f"joining {dest.name}") from None
        raise
    _verify(whole, dest.name, sha256, parts)
    os.replace(whole, dest)
    fsync_dir(dest.parent)
    for p in parts:
        p.unlink(missing_ok=True)
    return dest
