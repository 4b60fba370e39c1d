"""Both model hubs on 127.0.0.1, as far as the tool speaks them: ModelScope's file listing
(/api/v1/models/<id>/repo/files) and download (/api/v1/models/<id>/repo?FilePath=), Hugging Face's
model_info (/api/models/<id>/revision/<rev>?blobs=true) and resolve (/<id>/resolve/<rev>/<path>).
Downloads answer with a 302 to a second, CDN-like port that serves Range requests. Every body byte the CDN
sends is logged per file, so a test can prove that fit read nothing past the headers and that a resumed
download fetched each byte about once.
"""

from __future__ import annotations

import hashlib
import json
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ascend_setup.simulate.index_server import serve_tls

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS = (".safetensors", ".bin", ".pt", ".gguf")


@dataclass
class Sent:
    repo: str
    path: str
    start: int
    end: int  # exclusive: bytes [start, end) were written to the socket


@dataclass
class HubBehaviour:
    """How the CDN serves bodies (the kill tests pace it; the sha256 test corrupts a file once)."""

    chunk: int = 64 * 1024
    chunk_delay: float = 0.0
    corrupt_once: Set[Tuple[str, str]] = field(default_factory=set)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients hang up mid-transfer on purpose (ranges, kills)


def _peer_closed(h: BaseHTTPRequestHandler) -> bool:
    if isinstance(h.connection, ssl.SSLSocket):  # no MSG_PEEK through TLS: a write to a gone peer fails instead
        return False
    try:
        readable, _, _ = select.select([h.connection], [], [], 0)
        return bool(readable) and h.connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class LocalHub:
    """Serve model directories {repo id: directory}; `modelscope` and `huggingface` are the endpoints."""

    def __init__(
        self, models: Dict[str, Path], behaviour: Optional[HubBehaviour] = None, tls: Optional[Tuple[Path, Path]] = None
    ) -> None:
        """`tls`: (certificate chain, key) to serve both ports over HTTPS (a site CA's hub, or a proxy's)."""
        self.models = dict(models)
        self.behaviour = behaviour or HubBehaviour()
        self.sent: List[Sent] = []
        self.requests: List[str] = []
        self._lock = threading.Lock()
        hub = self

        class Api(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hub.requests.append(self.path)
                hub._api(self)

            def do_HEAD(self) -> None:
                hub._api(self)

        class Cdn(Api):
            def do_GET(self) -> None:
                hub.requests.append("cdn:" + self.path)
                hub._cdn(self)

        self.api = _Server(("127.0.0.1", 0), Api)
        self.cdn = _Server(("127.0.0.1", 0), Cdn)
        self.scheme = serve_tls(tls, self.api, self.cdn)
        for server in (self.api, self.cdn):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.api.server_address[1]}"

    def close(self) -> None:
        for server in (self.api, self.cdn):
            server.shutdown()
            server.server_close()

    def served(self, repo: str, path: str) -> int:
        """Body bytes of one file the CDN has sent, over every request."""
        with self._lock:
            return sum(s.end - s.start for s in self.sent if (s.repo, s.path) == (repo, path))

    def ranges(self, repo: str, path: str) -> List[Tuple[int, int]]:
        with self._lock:
            return [(s.start, s.end) for s in self.sent if (s.repo, s.path) == (repo, path)]

    # --- the API port -------------------------------------------------------------------------------------
    def _files(self, repo: str) -> List[Path]:
        root = self.models[repo]
        return sorted(p for p in root.rglob("*") if p.is_file())

    @staticmethod
    def _sha(path: Path) -> Optional[str]:
        """The file's sha256; None past 256 MiB (the tests' sparse 70 GiB shards: never hashed, never fetched)."""
        if path.stat().st_size > 256 * 2**20:
            return None
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    def _api(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = unquote(parts.path)
        if path.startswith("/api/v1/models/"):  # ModelScope
            rest = path[len("/api/v1/models/") :]
            repo, _, tail = rest.rpartition("/repo")
            if repo not in self.models:
                return self._json(h, 404, {"Code": 10010205001, "Message": "model not found", "Data": None})
            if tail == "/files":
                root = self.models[repo]
                files = [
                    {
                        "Name": p.name,
                        "Path": str(p.relative_to(root)),
                        "Type": "blob",
                        "Size": p.stat().st_size,
                        "Sha256": self._sha(p),
                        "Revision": COMMIT,
                    }
                    for p in self._files(repo)
                ]
                return self._json(h, 200, {"Code": 200, "Data": {"Files": files}, "Success": True})
            if tail == "" and "FilePath" in query:
                return self._redirect(h, repo, query["FilePath"])
        elif path.startswith("/api/models/"):  # Hugging Face model_info
            rest = path[len("/api/models/") :]
            repo, _, _revision = rest.partition("/revision/")
            if repo not in self.models:
                return self._json(h, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
            root = self.models[repo]
            siblings = []
            for p in self._files(repo):
                entry = {"rfilename": str(p.relative_to(root)), "size": p.stat().st_size, "blobId": "0" * 40}
                if p.name.endswith(LFS) and self._sha(p):
                    entry["lfs"] = {"sha256": self._sha(p), "size": p.stat().st_size, "pointerSize": 134}
                siblings.append(entry)
            return self._json(
                h, 200, {"id": repo, "modelId": repo, "sha": COMMIT, "siblings": siblings, "private": False, "tags": []}
            )
        else:  # Hugging Face resolve: /<owner>/<name>/resolve/<rev>/<path>
            repo, sep, tail = path.lstrip("/").partition("/resolve/")
            if sep and repo in self.models:
                return self._redirect(h, repo, tail.partition("/")[2])
        self._json(h, 404, {"error": "not found"})

    def _redirect(self, h: BaseHTTPRequestHandler, repo: str, file: str) -> None:
        if not (self.models[repo] / file).is_file():
            return self._json(h, 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        h.send_response(302)
        h.send_header("Location", f"{self.scheme}://127.0.0.1:{self.cdn.server_address[1]}/{quote(repo)}/{quote(file)}")
        h.send_header("Content-Length", "0")
        h.end_headers()

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, data: object, headers: Optional[Dict[str, str]] = None) -> None:
        body = json.dumps(data).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    # --- the CDN port -------------------------------------------------------------------------------------
    def _cdn(self, h: BaseHTTPRequestHandler) -> None:
        owner, name, file = unquote(urlsplit(h.path).path).lstrip("/").split("/", 2)
        repo = f"{owner}/{name}"
        path = self.models[repo] / file
        size = path.stat().st_size
        start, end, status = 0, size, 200
        rng = h.headers.get("Range", "")
        if rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            start = int(first or 0)
            end = min(int(last) + 1, size) if last else size
            if start >= size:
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{size}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            status = 206
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(end - start))
        h.send_header("Accept-Ranges", "bytes")
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        h.end_headers()
        b = self.behaviour
        corrupt = (repo, file) in b.corrupt_once
        b.corrupt_once.discard((repo, file))
        with path.open("rb") as handle:
            handle.seek(start)
            offset = start
            while offset < end:
                data = handle.read(min(b.chunk, end - offset))
                if corrupt:
                    data = bytes(x ^ 0xFF for x in data)
                if _peer_closed(h):  # as a real server notices: a killed client's socket is at EOF
                    return
                try:
                    h.wfile.write(data)
                    h.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                with self._lock:
                    self.sent.append(Sent(repo, file, offset, offset + len(data)))
                offset += len(data)
                if b.chunk_delay:
                    time.sleep(b.chunk_delay)
