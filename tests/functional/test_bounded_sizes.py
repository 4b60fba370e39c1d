"""Sizes are bounds. A mirror that says 1000 bytes (or a lock that pins 1000) and then streams 2 GiB is cut
just past the size, and the file and its `.part` are gone; a mirror that says no size at all is cut at the
largest a CPython archive may be. A bundle whose manifest is 1 GiB of spaces (a 1 MB tar.gz) is refused from
its tar header, never read. Each runs in a subprocess whose peak RSS (resource.getrusage) and time are
measured against generous caps, the server counting what it sent."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from helpers.cli import REPO, assert_one_line_error, clean_env
from helpers.handmade_bundle import SOC

GIB = 1 << 30
CHUNK = 1 << 20
#: Generous: the tool itself is ~60 MB; reading 1 GiB into memory would be 1000+.
RSS_CAP_MB = 300
SECONDS_CAP = 30.0


class Liar(BaseHTTPRequestHandler):
    """Says `advertised` bytes to HEAD (or nothing when None), then answers GET (and a Range GET, with 206)
    with no Content-Length and 2 GiB of zeros, until the client hangs up."""

    advertised: Optional[int] = 1000
    sent: List[int]

    def log_message(self, *args) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/gzip")
        if self.advertised is not None:
            self.send_header("Content-Length", str(self.advertised))
        self.end_headers()

    def do_GET(self) -> None:
        self.send_response(206 if "Range" in self.headers else 200)
        self.send_header("Content-Type", "application/gzip")
        self.send_header("Connection", "close")
        self.end_headers()
        zeros = b"\0" * CHUNK
        try:
            for _ in range(2 * GIB // CHUNK):
                self.wfile.write(zeros)
                self.sent.append(CHUNK)
        except OSError:  # the client hung up: what it was meant to do
            pass
        self.close_connection = True


@pytest.fixture
def liar() -> Iterator[type]:
    def start(advertised: Optional[int]) -> Tuple[ThreadingHTTPServer, List[int]]:
        sent: List[int] = []
        handler = type("ThisLiar", (Liar,), {"advertised": advertised, "sent": sent})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, sent

    servers: List[ThreadingHTTPServer] = []
    yield start  # type: ignore[misc]
    for s in servers:
        s.shutdown()
        s.server_close()


#: Each fetch of the tool that has a size to keep to, as a script run in a subprocess against the liar's URL.
FETCHES: Dict[str, Tuple[Optional[int], str, str]] = {
    # name: (what HEAD advertises, the script's fetch, the words of the refusal)
    "managed-python:head-says-1000": (
        1000,
        """
        from ascend_setup.managed.uv_python import fetch_archive
        fetch_archive(BUILDS, BUILDS.builds[0], OUT, OUT / "log", mirror=URL)
        """,
        "sent more than the file's 1000 bytes",
    ),
    "managed-python:no-size-said": (
        None,
        """
        from ascend_setup.managed import uv_python
        uv_python.MAX_ARCHIVE = 8 << 20  # the real bound (512 MiB) the same way, in a 64th of the time
        uv_python.fetch_archive(BUILDS, BUILDS.builds[0], OUT, OUT / "log", mirror=URL)
        """,
        f"sent more than the file's {8 << 20} bytes",
    ),
    "lock-pin:1000": (
        None,
        """
        from ascend_setup.index.download import download
        download([URL + "/w/f.whl"], OUT / "f.whl", size=1000)
        """,
        "sent more than the file's 1000 bytes",
    ),
    "lock-pin:split-in-parts": (
        None,
        """
        from ascend_setup.index.download import SPLIT_ABOVE, download_split
        download_split([URL + "/w/f.whl"], OUT / "f.whl", sha256=None, size=SPLIT_ABOVE)
        """,
        "sent more than the file's",
    ),
}

PRELUDE = """
import json, resource, sys, time
from pathlib import Path
from ascend_setup.errors import AscendSetupError
from ascend_setup.managed.pinned import PythonBuilds
URL, OUT = sys.argv[1], Path(sys.argv[2])
BUILDS = PythonBuilds.model_validate({"source": "t", "release": URL, "mirrors": [], "builds": [
    {"version": "3.11.16", "arch": "x86_64", "build": "20260814", "file": "cpython.tar.gz", "sha256": "a" * 64}]})
started = time.monotonic()
error = ""
try:
BODY
except AscendSetupError as exc:
    error = exc.message
print(json.dumps({"error": error, "seconds": time.monotonic() - started,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


@pytest.mark.parametrize("case", FETCHES)
def test_a_download_stops_past_the_size_it_was_given(liar, tmp_path: Path, case: str) -> None:
    advertised, body, words = FETCHES[case]
    server, sent = liar(advertised)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    out = tmp_path / "out"
    out.mkdir()
    script = PRELUDE.replace("BODY", textwrap.indent(textwrap.dedent(body).strip(), "    "))
    proc = subprocess.run(
        [sys.executable, "-c", script, url, str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(tmp_path, {"PYTHONPATH": str(REPO)}),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    print(case, f"{sum(sent) / CHUNK:.0f} MiB sent, {result['seconds']:.2f} s, peak RSS {result['rss_mb']:.0f} MB")
    assert words in result["error"], result
    assert result["seconds"] < SECONDS_CAP and result["rss_mb"] < RSS_CAP_MB, result
    time.sleep(0.2)  # the server's last write after the hang-up
    assert sum(sent) < 64 * CHUNK, f"{sum(sent)} bytes sent: the client read on"
    assert not [p.name for p in out.rglob("*") if p.is_file() and p.name != "log"]  # no file, no .part


def _gzip_tar_of_spaces(path: Path, name: str, size: int) -> Path:
    """A tar.gz whose one member `name` is `size` spaces, written as 1 MiB gzip members (a gzip file may be
    several), so it takes a second to write and is ~1 MB on disk: what a hostile bundle costs its maker."""
    info = tarfile.TarInfo(name)
    info.size = size
    block = gzip.compress(b" " * CHUNK, compresslevel=9)
    with path.open("wb") as out:
        out.write(gzip.compress(info.tobuf(tarfile.GNU_FORMAT)))
        for _ in range(size // CHUNK):
            out.write(block)
        out.write(gzip.compress(b"\0" * (2 * tarfile.BLOCKSIZE)))  # the end of the archive
    return path


def _measured(argv: List[str], home: Path) -> Tuple[subprocess.CompletedProcess, float, float]:
    """The CLI run as a child of a small wrapper that reports its peak RSS (RUSAGE_CHILDREN) and time."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.monotonic()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(p.stderr)\n"
        "print(json.dumps({'rc': p.returncode, 's': time.monotonic() - t,\n"
        "                  'mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "ascend_setup", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(home),
    )
    measured = json.loads(proc.stdout)
    return (subprocess.CompletedProcess(argv, measured["rc"], "", proc.stderr), measured["s"], measured["mb"])


@pytest.mark.parametrize("command", ["verify", "install"])
def test_a_manifest_of_a_gib_of_spaces_is_refused_from_its_header(tmp_path: Path, command: str) -> None:
    tar = _gzip_tar_of_spaces(tmp_path / "bundle.tar.gz", "manifest.json", GIB)
    assert tar.stat().st_size < 8 << 20
    argv = (
        ["bundle", "verify", str(tar)]
        if command == "verify"
        else [
            "install",
            "--cann",
            "9.1.0",
            "--bundle",
            str(tar),
            "--workdir",
            str(tmp_path / "wd"),
            "--soc",
            SOC,
            "--yes",
        ]
    )
    home = tmp_path / "home"
    home.mkdir()
    proc, seconds, rss_mb = _measured(argv, home)
    print(command, f"{seconds:.2f} s, peak RSS {rss_mb:.0f} MB")
    line = assert_one_line_error(proc, 2)
    assert f"manifest.json is {GIB} bytes, more than the" in line, line
    assert seconds < SECONDS_CAP and rss_mb < RSS_CAP_MB, (seconds, rss_mb)
    assert not (tmp_path / "wd").exists()


def test_a_sparse_gib_manifest_in_a_bundle_directory_is_refused_by_its_size(cli, tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    root.mkdir()
    with (root / "manifest.json").open("wb") as handle:
        handle.truncate(GIB)
    line = assert_one_line_error(cli("bundle", "verify", str(root)), 2)
    assert f"is {GIB} bytes, more than the" in line and "bundle manifest" in line, line
