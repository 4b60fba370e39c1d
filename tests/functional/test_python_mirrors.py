"""Which mirrors have the pinned file: each asked with HEAD at once, the answers in the order of preference,
each problem in words (refused, 404, an HTML page in the archive's place, too slow), on loopback servers."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers.python_releases import ReleaseServer

from ascend_setup.managed.sources import probe_all


class _Page(BaseHTTPRequestHandler):
    """A proxy's or portal's page where the archive should be (200, text/html); slow when asked to be."""

    delay = 0.0

    def log_message(self, *args) -> None:
        pass

    def do_HEAD(self) -> None:
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", "10")
        self.end_headers()


def _serve(handler) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_probes_name_each_problem_in_the_order_of_preference() -> None:
    release = ReleaseServer({"20990101/cpython.tar.gz": b"x" * 1234})
    page = _serve(_Page)
    slow = _serve(type("Slow", (_Page,), {"delay": 3.0}))
    try:
        urls = [
            "http://127.0.0.1:9/r/20990101/cpython.tar.gz",
            f"{release.url}/20990101/other.tar.gz",
            f"http://127.0.0.1:{page.server_address[1]}/20990101/cpython.tar.gz",
            f"http://127.0.0.1:{slow.server_address[1]}/20990101/cpython.tar.gz",
            f"{release.url}/20990101/cpython.tar.gz",
        ]
        probes = probe_all(urls, timeout=1.0)
        assert [p.url for p in probes] == urls
        assert [p.problem for p in probes[:2]] == ["connection refused", "HTTP 404"]
        assert probes[2].problem.startswith("an HTML page") and "within 1 s" in probes[3].problem
        assert probes[4].ok and probes[4].size == 1234
        assert [r[0] for r in release.requests] == ["HEAD", "HEAD"]  # nothing downloaded
    finally:
        release.close()
        for s in (page, slow):
            s.shutdown()
            s.server_close()
