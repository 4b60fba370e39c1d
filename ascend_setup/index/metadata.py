"""A file's core metadata without downloading it whole: PEP 658, then zip range reads, then PKG-INFO."""

from __future__ import annotations

import io
import sys
import tarfile
import threading
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from typing import IO, TYPE_CHECKING, Dict, List, Optional, TypedDict, cast

from ascend_setup.index.filecache import FileTextCache
from ascend_setup.index.http import IndexUnreachable, get
from ascend_setup.index.simple import IndexFile, local_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the tool runs on 3.9+; tomli is tomllib's backport
    import tomli as tomllib

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer


class RangeReader(io.RawIOBase):
    """A seekable file over HTTP Range requests, so zipfile can read just the central directory."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.pos = url, size, 0
        self.fetched = self.requests = 0  # what the reads cost, for the caller to report

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)  # BufferedReader's own byte buffer, written through a view
        want = min(len(view), self.size - self.pos)
        if want <= 0:
            return 0
        response = get(self.url, headers={"Range": f"bytes={self.pos}-{self.pos + want - 1}"})
        if response.status_code != 206:
            raise IndexUnreachable(f"{self.url} does not serve byte ranges (HTTP {response.status_code})")
        data = response.content[:want]
        view[: len(data)] = data
        self.pos += len(data)
        self.fetched += len(data)
        self.requests += 1
        return len(data)


def content_length(url: str) -> Optional[int]:
    response = get(url, headers={"Range": "bytes=0-0"})
    crange = response.headers.get("Content-Range", "")
    if response.status_code == 206 and "/" in crange:
        total = crange.rsplit("/", 1)[1]
        return int(total) if total.isdigit() else None
    return None


def parse_requires(metadata_text: str) -> List[str]:
    message = HeaderParser().parsestr(metadata_text)
    return [str(v) for v in (message.get_all("Requires-Dist") or [])]


def _from_wheel_zip(handle: IO[bytes]) -> str:
    with zipfile.ZipFile(handle) as archive:
        name = next(n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode("utf-8", errors="replace")


@dataclass
class MemberRead:
    """One member of a wheel, and what reading it cost (bytes fetched of `size`; 0 for a local file)."""

    text: Optional[str]  # None: the wheel has no such member
    fetched: int
    requests: int
    size: int


def _member_text(handle: IO[bytes], member: str) -> Optional[str]:
    with zipfile.ZipFile(handle) as archive:
        try:
            return archive.read(member).decode("utf-8", errors="replace")
        except KeyError:
            return None


def wheel_member(f: IndexFile, member: str, buffer_size: int = 64 * 1024) -> MemberRead:
    """One file inside a wheel, read with HTTP Range requests: the zip's end record and central directory,
    then that member alone (a small buffer: the member is tiny, the wheel may be tens of MB)."""
    path = local_path(f.url)
    if path is not None:
        with open(path, "rb") as handle:
            return MemberRead(_member_text(handle, member), 0, 0, path.stat().st_size)
    size = f.size or content_length(f.url)
    if not size:
        raise IndexUnreachable(f"{f.url} does not say its size (no byte ranges)")
    raw = RangeReader(f.url, size)
    text = _member_text(io.BufferedReader(raw, buffer_size=buffer_size), member)
    return MemberRead(text, raw.fetched, raw.requests, size)


def _from_sdist(handle: IO[bytes], member_name: str = "PKG-INFO") -> str:
    """One top-level file of a streamed sdist (PKG-INFO, pyproject.toml): reading stops once it is found."""
    with tarfile.open(fileobj=handle, mode="r|*") as archive:
        for member in archive:
            if member.name.count("/") == 1 and member.name.endswith("/" + member_name):
                extracted = archive.extractfile(member)
                if extracted is not None:
                    return extracted.read().decode("utf-8", errors="replace")
    raise IndexUnreachable(f"no {member_name} in the sdist")


def _sdist_stream(f: IndexFile) -> IO[bytes]:
    """A readable byte stream of an sdist, local or remote (the caller closes it)."""
    path = local_path(f.url)
    if path is not None:
        return open(path, "rb")
    response = get(f.url, stream=True, timeout=120)
    if response.status_code != 200:
        response.close()
        raise IndexUnreachable(f"{f.url} answered HTTP {response.status_code}")
    response.raw.decode_content = True
    return cast(IO[bytes], response.raw)  # urllib3's response: a binary file object that tarfile's "r|*" reads


def _sdist_pyproject(f: IndexFile) -> str:
    """The sdist's pyproject.toml, or "" when it has none."""
    stream = _sdist_stream(f)
    try:
        return _from_sdist(stream, "pyproject.toml")
    except IndexUnreachable:
        return ""
    finally:
        stream.close()


#: An sdist's [build-system] table, the two keys the lock reads (a name with a dash: the functional form).
BuildSystem = TypedDict("BuildSystem", {"build-backend": str, "requires": List[str]})


def build_system(f: IndexFile, cache: Optional[FileTextCache] = None) -> BuildSystem:
    """An sdist's [build-system] table (setuptools' legacy default when it has no pyproject.toml)."""
    legacy: BuildSystem = {"build-backend": "setuptools.build_meta:__legacy__", "requires": ["setuptools", "wheel"]}
    text = (cache or FileTextCache(None)).text(f.sha256, "pyproject", lambda: _sdist_pyproject(f))
    if not text:
        return legacy
    try:
        table = tomllib.loads(text).get("build-system") or {}
    except tomllib.TOMLDecodeError:
        return legacy
    return {
        "build-backend": table.get("build-backend", legacy["build-backend"]),
        "requires": [str(r) for r in table.get("requires", [])],
    }


class MetadataReader:
    """Core metadata per file URL, cached for the run (and on disk by sha256, given a FileTextCache)."""

    def __init__(self, files: Optional[FileTextCache] = None) -> None:
        self._cache: Dict[str, str] = {}
        self._lock = threading.Lock()
        self._files = files or FileTextCache(None)

    def metadata(self, f: IndexFile) -> str:
        with self._lock:
            if f.url in self._cache:
                return self._cache[f.url]
        text = self._files.text(f.sha256, "metadata", lambda: self._read(f))
        with self._lock:
            self._cache[f.url] = text
        return text

    def requires(self, f: IndexFile) -> List[str]:
        return parse_requires(self.metadata(f))

    def _read(self, f: IndexFile) -> str:
        path = local_path(f.url)
        if path is not None:
            with open(path, "rb") as handle:
                return _from_wheel_zip(handle) if f.kind == "wheel" else _from_sdist(handle)
        if f.metadata_url:
            response = get(f.metadata_url)
            if response.status_code == 200:
                return response.text
        if f.kind == "wheel":
            size = f.size or content_length(f.url)
            if size:
                reader = io.BufferedReader(RangeReader(f.url, size), buffer_size=256 * 1024)
                return _from_wheel_zip(reader)
        if f.kind == "wheel":
            response = get(f.url, timeout=120)
            if response.status_code != 200:
                raise IndexUnreachable(f"{f.url} answered HTTP {response.status_code}")
            return _from_wheel_zip(io.BytesIO(response.content))
        stream = _sdist_stream(f)
        try:
            return _from_sdist(stream)
        finally:
            stream.close()
