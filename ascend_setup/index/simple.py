"""PEP 691 (JSON) / PEP 503 (HTML) simple-API client, over http(s) and file:// indexes."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Protocol, Tuple, Union
from urllib.parse import unquote, urldefrag, urljoin, urlparse
from urllib.request import url2pathname

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from ascend_setup.index.http import IndexUnreachable, get

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


class IndexGarbage(IndexUnreachable):
    """The index answered, but not with a simple-API page."""


#: A wheel's build tag, as pip orders it: () when the name has none, else (number, rest) of `1abc`.
WheelBuild = Union[Tuple[()], Tuple[int, str]]


@dataclass(frozen=True)
class IndexFile:
    """One distribution file an index offers, with everything pip would look at.

    Tags are parsed on first use: a big project page lists thousands of wheels, and only the
    files of versions that pass the specifier are ever asked for their tags."""

    filename: str
    url: str
    index: str
    name: str
    version: Version
    kind: str  # wheel | sdist
    tag_text: str = ""
    build: WheelBuild = ()
    sha256: Optional[str] = None
    size: Optional[int] = None
    requires_python: Optional[str] = None
    yanked: bool = False
    metadata_url: Optional[str] = None

    @cached_property
    def tags(self) -> FrozenSet[Tag]:
        return parse_tag(self.tag_text) if self.tag_text else frozenset()


@dataclass
class ProjectPage:
    name: str
    index: str
    files: List[IndexFile] = field(default_factory=list)
    found: bool = True
    error: Optional[str] = None


@lru_cache(maxsize=65536)
def _version(text: str) -> Version:
    return Version(text)


def _wheel_parts(filename: str) -> Optional[Tuple[str, Version, WheelBuild, str]]:
    """(name, version, build, 'py-abi-plat') of a wheel file name; None when it is not one."""
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    build: WheelBuild = ()
    if len(parts) == 6:
        match = re.match(r"^(\d+)(.*)$", parts[2])
        if not match:
            return None
        build = (int(match.group(1)), match.group(2))
    try:
        version = _version(parts[1])
    except InvalidVersion:
        return None
    return canonicalize_name(parts[0]), version, build, "-".join(parts[-3:])


def make_file(
    filename: str,
    url: str,
    index: str,
    *,
    sha256: Optional[str] = None,
    size: Optional[int] = None,
    requires_python: Optional[str] = None,
    yanked: bool = False,
    metadata: bool = False,
) -> Optional[IndexFile]:
    """An IndexFile from what a page says; None for files pip would ignore (eggs, installers)."""
    meta_url = url + ".metadata" if metadata else None
    if filename.endswith(".whl"):
        parts = _wheel_parts(filename)
        if parts is None:
            return None
        name, version, build, tag_text = parts
        return IndexFile(
            filename,
            url,
            index,
            name,
            version,
            "wheel",
            tag_text,
            build,
            sha256,
            size,
            requires_python or None,
            yanked,
            meta_url,
        )
    try:
        name, version = parse_sdist_filename(filename)
    except (InvalidSdistFilename, ValueError):
        return None
    return IndexFile(
        filename,
        url,
        index,
        str(name),
        version,
        "sdist",
        "",
        (),
        sha256,
        size,
        requires_python or None,
        yanked,
        meta_url,
    )


def _absolute(page_url: str, href: str) -> str:
    return href if "://" in href[:12] else urljoin(page_url, href)


def _hash_from(url: str) -> Tuple[str, Optional[str]]:
    clean, fragment = urldefrag(url)
    if fragment.startswith("sha256="):
        return clean, fragment.split("=", 1)[1]
    return clean, None


#: Tags a real simple-API page is made of; a page with none of them is not one.
_PAGE_TAGS = {"html", "head", "body", "title", "meta", "a", "h1", "br", "pre"}


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: List[Dict[str, Optional[str]]] = []
        self._current: Optional[Dict[str, Optional[str]]] = None
        self.saw_markup = False

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        if tag in _PAGE_TAGS:
            self.saw_markup = True
        if tag == "a":
            self._current = dict(attrs)
            self._current["#text"] = ""
            self.anchors.append(self._current)

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._current["#text"] = (self._current.get("#text") or "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._current = None


def parse_html(text: str, page_url: str, index: str) -> List[IndexFile]:
    parser = _Anchors()
    parser.feed(text)
    if not parser.saw_markup:
        raise IndexGarbage(f"{page_url} did not return a simple-API page")
    files = []
    for a in parser.anchors:
        href = a.get("href")
        if not href:
            continue
        url, sha = _hash_from(_absolute(page_url, href))
        filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
        meta = a.get("data-core-metadata", a.get("data-dist-info-metadata"))
        f = make_file(
            filename,
            url,
            index,
            sha256=sha,
            requires_python=a.get("data-requires-python"),
            yanked="data-yanked" in a,
            metadata=meta is not None and meta != "false",
        )
        if f is not None:
            files.append(f)
    return files


def parse_json(data: object, page_url: str, index: str) -> List[IndexFile]:
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise IndexGarbage(f"{page_url} returned JSON that is not a PEP 691 project page")
    files = []
    for entry in data["files"]:
        url = _absolute(page_url, entry.get("url", ""))
        url, frag_sha = _hash_from(url)
        meta = entry.get("core-metadata", entry.get("dist-info-metadata", False))
        yanked = entry.get("yanked", False)
        f = make_file(
            entry.get("filename", ""),
            url,
            index,
            sha256=(entry.get("hashes") or {}).get("sha256") or frag_sha,
            size=entry.get("size"),
            requires_python=entry.get("requires-python"),
            yanked=bool(yanked),
            metadata=bool(meta),
        )
        if f is not None:
            files.append(f)
    return files


class PageSource(Protocol):
    """Where the project pages of one index URL come from: the index itself (SimpleIndex), or a second source
    of the same files (an offline bundle's listing) put behind that URL."""

    def project(self, name: str) -> ProjectPage: ...


class SharedPages:
    """The project pages one command has read, by (index URL, project), shared by every SimpleIndex of the
    command's pools: each page is fetched once per command. Only pages that answered are shared: a timeout
    or an error stays with the pool that met it, so a later pool with a longer deadline asks again. `sources`
    puts another PageSource behind an index URL: its pages are read from it, never from the network."""

    def __init__(self, sources: Optional[Mapping[str, PageSource]] = None) -> None:
        self._pages: Dict[Tuple[str, str], ProjectPage] = {}
        self._lock = threading.Lock()
        self.sources = {(u if u.endswith("/") else u + "/"): s for u, s in (sources or {}).items()}

    def get(self, url: str, name: str) -> Optional[ProjectPage]:
        source = self.sources.get(url)
        if source is not None:
            return source.project(name)
        with self._lock:
            return self._pages.get((url, name))

    def keep(self, url: str, name: str, page: ProjectPage) -> None:
        if page.error is None:
            with self._lock:
                self._pages.setdefault((url, name), page)


class SimpleIndex:
    """One index. Pages are cached for the life of the object (one run), and in `shared` for every other
    SimpleIndex of the same command."""

    def __init__(
        self, url: str, *, timeout: float = 30.0, attempts: int = 3, shared: Optional[SharedPages] = None
    ) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.timeout = timeout
        self.attempts = attempts
        self.shared = shared
        self._cache: Dict[str, ProjectPage] = {}
        self._lock = threading.Lock()
        self.down: Optional[str] = None  # set once the index itself cannot be reached: ask it no more

    def project_url(self, name: str) -> str:
        return urljoin(self.url, canonicalize_name(name) + "/")

    def project(self, name: str) -> ProjectPage:
        key = canonicalize_name(name)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        page = self.shared.get(self.url, key) if self.shared is not None else None
        if page is None:
            page = self._ask(key)
            if self.shared is not None:
                self.shared.keep(self.url, key, page)
        with self._lock:
            self._cache[key] = page
        return page

    def _ask(self, key: str) -> ProjectPage:
        if self.down:
            return ProjectPage(key, self.url, found=False, error=self.down)
        try:
            return self._fetch(key)
        except IndexUnreachable as exc:
            if not isinstance(exc, IndexGarbage):
                self.down = exc.message.replace(self.project_url(key), self.url)
            return ProjectPage(key, self.url, found=False, error=exc.message)

    def _fetch(self, name: str) -> ProjectPage:
        url = self.project_url(name)
        if self.url.startswith("file:"):
            return self._fetch_file(name, url)
        response = get(url, headers={"Accept": ACCEPT}, timeout=self.timeout, attempts=self.attempts)
        if response.status_code == 404:
            return ProjectPage(name, self.url, found=False)
        if response.status_code >= 400:
            raise IndexUnreachable(f"{url} answered HTTP {response.status_code}")
        ctype = response.headers.get("Content-Type", "").split(";")[0].strip()
        if "json" in ctype:
            try:
                data = response.json()
            except ValueError:
                raise IndexGarbage(f"{url} returned invalid JSON") from None
            return ProjectPage(name, self.url, parse_json(data, response.url, self.url))
        return ProjectPage(name, self.url, parse_html(response.text, response.url, self.url))

    def _fetch_file(self, name: str, url: str) -> ProjectPage:
        root = Path(url2pathname(urlparse(self.url).path))
        if not root.is_dir():
            raise IndexUnreachable(f"file index {root} does not exist")
        directory = Path(url2pathname(urlparse(url).path))
        if not directory.is_dir():
            return ProjectPage(name, self.url, found=False)
        index_html = directory / "index.html"
        if index_html.is_file():
            return ProjectPage(name, self.url, parse_html(index_html.read_text(errors="replace"), url, self.url))
        files = [
            make_file(p.name, p.as_uri(), self.url, size=p.stat().st_size)
            for p in sorted(directory.iterdir())
            if p.is_file()
        ]
        return ProjectPage(name, self.url, [f for f in files if f is not None])


class IndexSet:
    """The primary index plus extras, asked concurrently, like pip's --index-url/--extra-index-url."""

    def __init__(self, urls: Iterable[str], workers: int = 16, pool: Optional[Dict[str, SimpleIndex]] = None) -> None:
        """`pool` (url -> SimpleIndex) shares already fetched pages between sets (the gate's, the forecast's)."""
        pool = {} if pool is None else pool
        self.indexes = [pool.setdefault(u, SimpleIndex(u)) for u in dict.fromkeys(urls)]
        self.workers = workers

    @property
    def urls(self) -> List[str]:
        return [i.url for i in self.indexes]

    def pages(self, name: str) -> List[ProjectPage]:
        return [index.project(name) for index in self.indexes]

    def prefetch(self, names: Iterable[str]) -> Dict[str, List[ProjectPage]]:
        """Every (index, project) page at once; the result keeps index order."""
        names = list(dict.fromkeys(canonicalize_name(n) for n in names))
        jobs = [(n, i) for n in names for i in self.indexes]
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(jobs) or 1))) as pool:
            list(pool.map(lambda job: job[1].project(job[0]), jobs))
        return {n: self.pages(n) for n in names}


class IndexPool(Dict[str, SimpleIndex]):
    """url -> SimpleIndex for one consumer (a gate, a closure), its indexes reading and adding to `shared`:
    each consumer keeps its own deadline and its own view of an index that is down, and no page is fetched
    twice in one command. Consumers add indexes with `setdefault(url, SimpleIndex(url, ...))`."""

    def __init__(self, shared: SharedPages) -> None:
        super().__init__()
        self.shared = shared

    def setdefault(self, url: str, index: SimpleIndex) -> SimpleIndex:
        if url not in self:
            index.shared = self.shared
            self[url] = index
        return self[url]


def local_path(url: str) -> Optional[Path]:
    """The filesystem path of a file:// URL (None for others)."""
    if not url.startswith("file:"):
        return None
    return Path(url2pathname(urlparse(url).path))
