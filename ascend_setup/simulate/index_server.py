"""A real package index on 127.0.0.1: PEP 691 JSON and PEP 503 HTML, Range requests, PEP 658
metadata, yanked files, requires-python, and shaped misbehaviour for the mirror tests."""

from __future__ import annotations

import hashlib
import html
import json
import ssl
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, Set, Tuple
from urllib.parse import quote, unquote

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename


@dataclass
class Served:
    path: Path
    project: str
    sha256: str
    yanked: bool = False
    requires_python: Optional[str] = None
    metadata: bool = False


@dataclass
class Behaviour:
    """How the server misbehaves (mirror tests, the demo's throttled download): all off by default."""

    bytes_per_second: Optional[float] = None  # throttle file bodies, each connection on its own
    line_bytes_per_second: Optional[float] = None  # the server's line: every connection's file bodies share it
    stall_after_headers: bool = False  # send headers of a file, then nothing
    stall_after_bytes: Optional[int] = None  # send this many bytes of a file, then nothing
    file_status: Optional[int] = None  # e.g. 404 for every file
    garbage: bool = False  # project pages are junk HTML
    json_pages: bool = True  # answer PEP 691 JSON when asked
    first_byte_delay: float = 0.0
    page_delay: float = 0.0  # seconds before a project page (an index far away, or loaded)
    hidden_projects: Set[str] = field(default_factory=set)
    fail_first: int = 0  # answer this many project-page requests with HTTP 503


def serve_tls(tls: Optional[Tuple[Path, Path]], *servers: ThreadingHTTPServer) -> str:
    """The scheme `servers` answer in: with `tls` (certificate chain, key), each one's socket wrapped for
    HTTPS. The handshake runs in each connection's own thread (on its first read), not in the accept loop:
    there 32 clients at once queued behind one another past their timeouts on a loaded machine."""
    if tls is None:
        return "http"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls[0]), str(tls[1]))
    for server in servers:
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return "https"


class LocalIndex:
    """Serve a set of distribution files. `url` is the simple index root."""

    def __init__(self, behaviour: Optional[Behaviour] = None, tls: Optional[Tuple[Path, Path]] = None) -> None:
        """`tls`: (certificate chain, key) to serve HTTPS instead of HTTP."""
        self.files: Dict[str, Served] = {}
        self.behaviour = behaviour or Behaviour()
        self.requests: List[Tuple[str, Dict[str, str]]] = []  # (path, headers) of each GET, for tests to count
        self.line: Optional[_Line] = None
        self.lock = threading.Lock()
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # as real index servers do: no 40 ms delayed-ACK stall per response

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                index.requests.append((self.path, dict(self.headers)))
                index._handle(self)

            def do_HEAD(self) -> None:
                index._handle(self, head=True)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the gate's threads connect all at once; 5 dropped SYNs under load

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # clients hang up mid-transfer on purpose (ranges, stalls, kills)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.scheme = serve_tls(tls, self.server)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return self.base + "/simple/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(
        self, path: Path, *, yanked: bool = False, requires_python: Optional[str] = None, metadata: bool = False
    ) -> Served:
        if path.name.endswith(".whl"):
            project = str(parse_wheel_filename(path.name)[0])
        else:
            project = str(parse_sdist_filename(path.name)[0])
        served = Served(
            path,
            canonicalize_name(project),
            hashlib.sha256(path.read_bytes()).hexdigest(),
            yanked,
            requires_python,
            metadata,
        )
        self.files[path.name] = served
        return served

    def add_dir(self, directory: Path) -> None:
        for path in sorted(directory.iterdir()):
            if path.name.endswith((".whl", ".tar.gz")):
                self.add(path)

    # -- serving ------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, head: bool = False) -> None:
        path = h.path.split("?")[0]
        if path.startswith("/simple/"):
            return self._project(h, canonicalize_name(path[len("/simple/") :].strip("/")), head)
        if path.startswith("/files/"):
            name = unquote(path[len("/files/") :])
            if name.endswith(".metadata") and name[:-9] in self.files and self.files[name[:-9]].metadata:
                return self._send(h, 200, _metadata_of(self.files[name[:-9]].path), "text/plain", head)
            if name in self.files:
                return self._file(h, self.files[name], head)
        self._send(h, 404, b"not found", "text/plain", head)

    def _project(self, h: BaseHTTPRequestHandler, project: str, head: bool) -> None:
        b = self.behaviour
        if b.fail_first > 0:
            b.fail_first -= 1
            return self._send(h, 503, b"try again", "text/plain", head)
        if b.page_delay:
            time.sleep(b.page_delay)
        if b.garbage:
            return self._send(h, 200, b"<<<this is not an index>>> \x00\x01", "text/html", head)
        files = [f for f in self.files.values() if f.project == project and project not in b.hidden_projects]
        if not files:
            return self._send(h, 404, b"no such project", "text/plain", head)
        if b.json_pages and "application/vnd.pypi.simple.v1+json" in h.headers.get("Accept", ""):
            body = json.dumps(
                {
                    "meta": {"api-version": "1.1"},
                    "name": project,
                    "files": [
                        {
                            "filename": f.path.name,
                            "url": f"/files/{quote(f.path.name)}",
                            "hashes": {"sha256": f.sha256},
                            "requires-python": f.requires_python,
                            "yanked": f.yanked,
                            "size": f.path.stat().st_size,
                            "core-metadata": f.metadata,
                        }
                        for f in files
                    ],
                }
            ).encode()
            return self._send(h, 200, body, "application/vnd.pypi.simple.v1+json", head)
        anchors = []
        for f in files:
            attrs = f' href="/files/{quote(f.path.name)}#sha256={f.sha256}"'
            if f.requires_python:
                attrs += f' data-requires-python="{html.escape(f.requires_python)}"'
            if f.yanked:
                attrs += ' data-yanked=""'
            if f.metadata:
                attrs += ' data-core-metadata="true"'
            anchors.append(f"<a{attrs}>{f.path.name}</a><br/>")
        body = ("<!DOCTYPE html><html><body>" + "\n".join(anchors) + "</body></html>").encode()
        self._send(h, 200, body, "text/html", head)

    def _file(self, h: BaseHTTPRequestHandler, f: Served, head: bool) -> None:
        b = self.behaviour
        if b.file_status:
            return self._send(h, b.file_status, b"nope", "text/plain", head)
        size = f.path.stat().st_size
        start, end, status = 0, size - 1, 200
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            if first:
                start = int(first)
                end = min(int(last), end) if last else end
            else:
                start = max(0, size - int(last))
            if start >= size:
                return self._send(h, 416, b"", "text/plain", head, {"Content-Range": f"bytes */{size}"})
            status = 206
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(end + 1 - start))
        h.send_header("Accept-Ranges", "bytes")
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        h.end_headers()
        if head:
            return
        if b.first_byte_delay:
            time.sleep(b.first_byte_delay)
        with f.path.open("rb") as handle:  # read as sent: a 150 MB wheel is never held whole per request
            handle.seek(start)
            if b.stall_after_headers:
                time.sleep(3600)
                return
            if b.stall_after_bytes is not None:
                h.wfile.write(handle.read(min(b.stall_after_bytes, end + 1 - start)))
                h.wfile.flush()
                time.sleep(3600)
                return
            try:
                self._send_paced(h, handle, end + 1 - start)
            except (BrokenPipeError, ConnectionResetError):
                pass

    def _send_paced(self, h: BaseHTTPRequestHandler, handle: BinaryIO, left: int) -> None:
        """`left` bytes of `handle`, at the connection's rate and within the line's, when they are shaped."""
        rates = [r for r in (self.behaviour.bytes_per_second, self.behaviour.line_bytes_per_second) if r]
        chunk = min(256 * 1024, max(1024, int(min(rates) / 20))) if rates else 1024 * 1024
        while left > 0:
            block = handle.read(min(chunk, left))
            if not block:
                return
            h.wfile.write(block)
            left -= len(block)
            if not rates:
                continue
            h.wfile.flush()
            now = time.monotonic()
            ready = now + len(block) / self.behaviour.bytes_per_second if self.behaviour.bytes_per_second else now
            line = self.behaviour.line_bytes_per_second
            if line:
                with self.lock:
                    if self.line is None or self.line.rate != line:
                        self.line = _Line(line)  # (set or changed since the server started)
                ready = max(ready, self.line.reserve(len(block)))
            time.sleep(max(0.0, ready - now))

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        ctype: str,
        head: bool,
        headers: Optional[Dict[str, str]] = None,
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.end_headers()
        if not head:
            h.wfile.write(body)


class _Line:
    """A server's line: the bytes of all its connections pass it one after another, at `rate` per second."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.lock = threading.Lock()
        self.free = 0.0

    def reserve(self, n: int) -> float:
        """When `n` more bytes will have passed the line (a time.monotonic() value)."""
        with self.lock:
            self.free = max(self.free, time.monotonic()) + n / self.rate
            return self.free


def _metadata_of(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name)


class BlackHole:
    """A TCP port on 127.0.0.1 that completes connections and then never says a word."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)  # the kernel accepts up to the backlog; nobody ever reads or answers

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/simple/"

    def close(self) -> None:
        self.sock.close()
