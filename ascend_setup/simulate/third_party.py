"""The third-party archives of the operator build (json, abseil-cpp, makeself), served on 127.0.0.1.

The real sdist's `csrc/cmake/third_party/*.cmake` download them mid-build from a host that air-gapped
sites cannot reach. The stub sdist names these stand-ins the same way (same CMake syntax: a URL, a
`URL_HASH SHA256=` where the real file has one, a `pkg/` test or a SOURCE_DIR), so the tool reads both
with the same code, and the stub build fetches whatever it does not find, as CMake would.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import zipfile
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, Tuple, Union

from ascend_setup.simulate.index_server import serve_tls


@dataclass(frozen=True)
class StubArchive:
    name: str
    url: str
    sha256: Optional[str]  # written into the CMake file as URL_HASH SHA256=...; None like the real json.cmake
    cmake_name: str  # csrc/cmake/third_party/<cmake_name>
    cmake_text: str
    found: str  # relative to csrc: what the stub's CMake tests for before it downloads


class _Quiet(SimpleHTTPRequestHandler):
    requests: Optional[List[str]] = None  # the server's record of the paths asked for (a test counts them)

    def log_message(self, *args: object) -> None:
        pass

    def send_head(self) -> Union[io.BytesIO, BinaryIO, None]:
        if self.requests is not None:
            self.requests.append(self.path)
        return super().send_head()


class ArchiveServer:
    """A plain static file server (the archives' origin, or a mirror given by --build-deps-url)."""

    def __init__(self, directory: Path, tls: Optional[Tuple[Path, Path]] = None) -> None:
        """`tls`: (certificate chain, key) to serve HTTPS instead of HTTP."""
        self.directory = directory
        self.requests: List[str] = []
        handler = type("Handler", (_Quiet,), {"requests": self.requests})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(directory)))
        self.server.daemon_threads = True
        self.scheme = serve_tls(tls, self.server)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _tar(members: Dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: Dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


PKG_CMAKE = """include(ExternalProject)
set({var}_PKG {name})
if(EXISTS "${{CANN_3RD_LIB_PATH}}/pkg/${{{var}_PKG}}")
  set(REQ_URL "file://${{CANN_3RD_LIB_PATH}}/pkg/${{{var}_PKG}}")
else()
  set(REQ_URL "{url}")
endif()
ExternalProject_Add({var}_build
                    URL ${{REQ_URL}}
                    URL_HASH SHA256={sha256}
                    DOWNLOAD_DIR ${{CANN_3RD_LIB_PATH}}/pkg
                    SOURCE_DIR ${{PROJECT_SOURCE_DIR}}/third_party/{var}
)
"""

UNPACK_CMAKE = """set({var}_PATH ${{CANN_3RD_LIB_PATH}}/{var})
if(NOT EXISTS "${{{var}_PATH}}/{found}")
  set(REQ_URL "{url}")
  include(ExternalProject)
  ExternalProject_Add(third_party_{var}
          URL ${{REQ_URL}}
          {hash_line}
          DOWNLOAD_DIR ${{CANN_3RD_LIB_PATH}}/pkg
          {no_extract}
          SOURCE_DIR ${{{var}_PATH}}
  )
endif()
"""


def build_stub_archives(directory: Path, base_url: str) -> List[StubArchive]:
    """Write the archives into `directory` (which `base_url` serves) and the CMake text that names them."""
    origin = directory / "cann-src-third-party"
    origin.mkdir(parents=True, exist_ok=True)
    blobs = {
        "include.zip": _zip({"include/nlohmann/json.hpp": "// stub nlohmann json\n"}),
        "abseil-cpp-20230802.1.tar.gz": _tar({"abseil-cpp-20230802.1/absl/log/absl_log.h": "// stub absl\n"}),
        "makeself-release-2.5.0-patch1.tar.gz": _tar(
            {
                "makeself-release-2.5.0-patch1/makeself.sh": "#!/bin/sh\n",
                "makeself-release-2.5.0-patch1/makeself-header.sh": "#\n",
            }
        ),
    }
    for name, data in blobs.items():
        (origin / name).write_bytes(data)
    sha = {name: hashlib.sha256(data).hexdigest() for name, data in blobs.items()}
    url = {name: f"{base_url}/cann-src-third-party/{name}" for name in blobs}
    json_name, absl, makeself = blobs
    return [
        StubArchive(
            json_name,
            url[json_name],
            None,
            "json.cmake",
            UNPACK_CMAKE.format(
                var="json",
                found="include/nlohmann/json.hpp",
                url=url[json_name],
                hash_line="",
                no_extract="DOWNLOAD_NO_EXTRACT TRUE",
            ),
            "third_party/json/include/nlohmann/json.hpp",
        ),
        StubArchive(
            absl,
            url[absl],
            sha[absl],
            "abseil-cpp.cmake",
            PKG_CMAKE.format(var="abseil", name=absl, url=url[absl], sha256=sha[absl]),
            f"third_party/pkg/{absl}",
        ),
        StubArchive(
            makeself,
            url[makeself],
            sha[makeself],
            "makeself-fetch.cmake",
            UNPACK_CMAKE.format(
                var="makeself",
                found="makeself.sh",
                url=url[makeself],
                hash_line=f"URL_HASH SHA256={sha[makeself]}",
                no_extract="",
            ),
            "third_party/makeself/makeself.sh",
        ),
    ]
