"""Files the tool fetches itself go several at a time, never more than `download.PER_HOST` connections to one
host, and a kill mid-way leaves each file's `.part` to be resumed from its own byte."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from helpers.cli import clean_env

from ascend_setup.index.download import PER_HOST
from ascend_setup.sourcebuild import thirdparty

SIZE = 1 << 20
RATE = 512 * 1024  # bytes per second per connection: each file takes about 2 s


class ShapedOrigin:
    """Serves `files` (name -> bytes) at RATE per connection, honouring Range; records each request's Range
    and the most requests it had in flight at once."""

    def __init__(self, files: Dict[str, bytes]) -> None:
        self.files = files
        self.requests: List[Tuple[str, Optional[str]]] = []
        self.in_flight = self.most_in_flight = 0
        lock = threading.Lock()
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                name = self.path.rsplit("/", 1)[-1]
                with lock:
                    origin.requests.append((name, self.headers.get("Range")))
                    origin.in_flight += 1
                    origin.most_in_flight = max(origin.most_in_flight, origin.in_flight)
                try:
                    data = origin.files[name]
                    start = int(self.headers["Range"][6:].split("-")[0]) if self.headers.get("Range") else 0
                    self.send_response(206 if start else 200)
                    self.send_header("Content-Length", str(len(data) - start))
                    if start:
                        self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                    self.end_headers()
                    step = RATE // 20
                    for i in range(start, len(data), step):  # the last byte sent ends the request here too
                        time.sleep(step / RATE)
                        self.wfile.write(data[i : i + step])
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with lock:
                        origin.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _archives(origin: ShapedOrigin) -> List[thirdparty.Archive]:
    return [
        thirdparty.Archive(
            name=name,
            url=f"{origin.url}/{name}",
            cmake_file=f"{name}.cmake",
            sha256=hashlib.sha256(data).hexdigest(),
            md5=None,
            unpack_to=None,
            strip_top=False,
        )
        for name, data in origin.files.items()
    ]


def _origin(count: int) -> ShapedOrigin:
    return ShapedOrigin({f"a{i}.tar.gz": bytes([i]) * SIZE for i in range(count)})


def test_archives_are_fetched_at_once_never_more_than_the_bound_per_host(tmp_path: Path) -> None:
    origin = _origin(PER_HOST + 2)
    try:
        start = time.monotonic()
        lines = thirdparty.fetch(_archives(origin), tmp_path / "cache", None)
        took = time.monotonic() - start
    finally:
        origin.close()
    assert len(lines) == PER_HOST + 2 and all(
        (tmp_path / "cache" / n).read_bytes() == d for n, d in origin.files.items()
    )
    assert origin.most_in_flight == PER_HOST, origin.most_in_flight  # overlapping, and never above the bound
    one = SIZE / RATE
    assert took < 3.5 * one, f"{took:.1f} s for {len(lines)} files of {one:.1f} s each"  # one at a time: 6x


FETCH = """
import sys
from pathlib import Path
from ascend_setup.sourcebuild import thirdparty
names, url, cache = sys.argv[1].split(","), sys.argv[2], Path(sys.argv[3])
thirdparty.fetch([thirdparty.Archive(name=n, url=f"{url}/{n}", cmake_file="x", sha256=None, md5=None,
                                     unpack_to=None, strip_top=False) for n in names], cache, None)
"""


def test_a_kill_mid_way_resumes_each_file_from_its_own_byte(tmp_path: Path) -> None:
    origin = _origin(PER_HOST + 1)
    cache = tmp_path / "cache"
    parts = {name: cache / f"{name}.part" for name in origin.files}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", FETCH, ",".join(origin.files), origin.url, str(cache)], env=clean_env(tmp_path)
        )
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline and sum(p.exists() and p.stat().st_size > 0 for p in parts.values()) < PER_HOST
        ):
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        had = {name: p.stat().st_size for name, p in parts.items() if p.exists()}
        assert len([s for s in had.values() if s > 0]) >= PER_HOST, had
        assert not any((cache / n).exists() for n in origin.files)  # killed before any was whole
        before = len(origin.requests)
        thirdparty.fetch(_archives(origin), cache, None)
    finally:
        origin.close()
    resumed = dict(origin.requests[before:])
    for name, data in origin.files.items():
        assert (cache / name).read_bytes() == data
        offset = had.get(name, 0)
        assert resumed[name] == (f"bytes={offset}-" if offset else None), (name, offset, resumed[name])


def _split_origin(tmp_path: Path, data: bytes):
    from ascend_setup.simulate.index_server import Behaviour, LocalIndex

    blob = tmp_path / "files" / "big-1.0.tar.gz"
    blob.parent.mkdir()
    blob.write_bytes(data)
    origin = LocalIndex(Behaviour(bytes_per_second=RATE))  # each connection capped: parts fill more
    origin.add(blob)
    return origin, f"{origin.base}/files/{blob.name}"


def test_a_big_file_comes_in_parts_over_the_bound_of_connections(tmp_path: Path, monkeypatch) -> None:
    from ascend_setup.index import download as dl

    monkeypatch.setattr(dl, "SPLIT_ABOVE", 256 * 1024)
    data = bytes(range(256)) * (SIZE // 256)
    origin, url = _split_origin(tmp_path, data)
    try:
        dest = dl.download_split(
            [url], tmp_path / "dl" / "big-1.0.tar.gz", sha256=hashlib.sha256(data).hexdigest(), size=len(data)
        )
    finally:
        origin.close()
    assert dest.read_bytes() == data
    step = SIZE // PER_HOST
    ranges = sorted(h.get("Range") for p, h in origin.requests if p.endswith("big-1.0.tar.gz"))
    assert ranges == sorted(f"bytes={i * step}-{(i + 1) * step - 1}" for i in range(PER_HOST)), ranges
    assert sorted(p.name for p in dest.parent.iterdir()) == ["big-1.0.tar.gz"]  # no part left behind


def test_each_part_resumes_from_its_own_byte_and_a_wrong_file_is_refused(tmp_path: Path, monkeypatch) -> None:
    from ascend_setup.errors import AscendSetupError
    from ascend_setup.index import download as dl

    monkeypatch.setattr(dl, "SPLIT_ABOVE", 256 * 1024)
    data = bytes(reversed(range(256))) * (SIZE // 256)
    step = SIZE // PER_HOST
    dest = tmp_path / "dl" / "big-1.0.tar.gz"
    dest.parent.mkdir()
    dest.with_name(dest.name + ".part2").write_bytes(data[2 * step : 2 * step + 100_000])  # what a kill left
    origin, url = _split_origin(tmp_path, data)
    try:
        dl.download_split([url], dest, sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        assert dest.read_bytes() == data
        asked = [h.get("Range") for p, h in origin.requests if p.endswith("big-1.0.tar.gz")]
        assert f"bytes={2 * step + 100_000}-{3 * step - 1}" in asked and f"bytes={2 * step}-{3 * step - 1}" not in asked
        other = tmp_path / "dl2" / "big-1.0.tar.gz"
        try:
            dl.download_split([url], other, sha256="0" * 64, size=len(data))
            raise AssertionError("a file whose hash differs was accepted")
        except AscendSetupError as exc:
            assert "sha256" in exc.message
        assert not other.exists() and list(other.parent.iterdir()) == []  # its parts go with it
    finally:
        origin.close()
