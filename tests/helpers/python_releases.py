"""A python-build-standalone release, served on 127.0.0.1: the managed interpreter's origin in tests.

The archive is laid out as the real `install_only_stripped` files are (one top folder `python/` holding
bin/, lib/ and include/), made from a CPython already on this machine; the server answers HEAD and GET
(with Range, as the release host's CDN does) for `<build>/<file>`, 404 for anything else, optionally at a
bounded rate so a test can stop a download half-way. A builds file pins it as the packaged one pins the
real release."""

from __future__ import annotations

import gzip
import hashlib
import json
import platform
import sys
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from pathlib import Path
from typing import Dict, List, Optional, Tuple
from urllib.parse import unquote

#: What the real stripped archives leave out, and what a test interpreter does not need.
_SKIP = {"test", "__pycache__", "idlelib", "tkinter", "turtledemo", "lib2to3", "site-packages"}
BUILD = "20990101"  # a release date no real build has: nothing can mistake the stand-in for a real one


def _keep(info: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
    parts = Path(info.name).parts
    if any(p in _SKIP for p in parts) or info.name.endswith(".a"):
        return None
    return info


def pbs_archive(dest_dir: Path, prefix: Optional[Path] = None) -> Tuple[Path, str, str]:
    """(archive, version, sha256): this machine's CPython (`prefix`, default this interpreter's) packed as
    python-build-standalone packs a release."""
    prefix = Path(prefix or sys.base_prefix)
    version = "%d.%d.%d" % sys.version_info[:3]
    minor = "%d.%d" % sys.version_info[:2]
    name = f"cpython-{version}+{BUILD}-{platform.machine()}-unknown-linux-gnu-install_only_stripped.tar.gz"
    dest_dir.mkdir(parents=True, exist_ok=True)
    archive = dest_dir / name
    with gzip.open(archive, "wb", compresslevel=1) as raw, tarfile.open(fileobj=raw, mode="w") as tar:
        for member in (f"bin/python{minor}", "bin/python3", f"lib/python{minor}", f"include/python{minor}"):
            if (prefix / member).exists() or (prefix / member).is_symlink():
                tar.add(prefix / member, arcname=f"python/{member}", filter=_keep)
        for lib in sorted((prefix / "lib").glob(f"libpython{minor}*.so*")):
            tar.add(lib, arcname=f"python/lib/{lib.name}")
    return archive, version, hashlib.sha256(archive.read_bytes()).hexdigest()


class ReleaseServer:
    """Serves `files` (release path `<build>/<file>` -> bytes), at `rate` bytes a second when given."""

    def __init__(self, files: Dict[str, bytes], rate: Optional[int] = None) -> None:
        self.files = files
        self.rate = rate
        self.requests: List[Tuple[str, str, Optional[str]]] = []  # (method, path, Range)
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _head(self, body: bool) -> None:
                path = unquote(self.path.lstrip("/"))
                origin.requests.append(("GET" if body else "HEAD", path, self.headers.get("Range")))
                data = origin.files.get(path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = int(self.headers["Range"][6:].split("-")[0]) if self.headers.get("Range") else 0
                self.send_response(206 if start else 200)
                self.send_header("Content-Type", "application/gzip")
                self.send_header("Content-Length", str(len(data) - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if body:
                    origin.send(self.wfile, data, start)

            def do_HEAD(self) -> None:
                self._head(body=False)

            def do_GET(self) -> None:
                self._head(body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def send(self, out: BufferedIOBase, data: bytes, start: int) -> None:
        step = 64 * 1024 if self.rate is None else max(1, self.rate // 20)
        try:
            for i in range(start, len(data), step):
                if self.rate is not None:
                    time.sleep(step / self.rate)
                out.write(data[i : i + step])
        except (BrokenPipeError, ConnectionResetError):
            pass

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def write_builds_file(path: Path, archive: Path, version: str, sha256: str, mirrors: List[str]) -> Path:
    """A builds file pinning the stand-in (as --python-builds takes it), its mirrors tried in order."""
    doc = {
        "source": "a stand-in release made from this machine's CPython (tests)",
        "release": mirrors[0] if mirrors else "http://127.0.0.1:9/",
        "mirrors": [{"url": m, "note": "loopback"} for m in mirrors],
        "builds": [
            {"version": version, "arch": platform.machine(), "build": BUILD, "file": archive.name, "sha256": sha256}
        ],
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
