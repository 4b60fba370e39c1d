"""The archives csrc's CMake files would download mid-build, fetched before the build instead.

The operator build downloads json, abseil-cpp, protobuf and makeself from the URLs its
`csrc/cmake/third_party/*.cmake` files name, unless they are already there: a host that cannot reach
that server (an air-gapped site, or any host that does not resolve it) fails 40 minutes in. So the URLs
and hashes are read from the extracted sdist (never written here), the archives are downloaded
(resumable) into `<workdir>/downloads/third-party`, checked, and put where CMake looks first:
`csrc/third_party/pkg/<name>` when the CMake file tests for it there, else unpacked into its SOURCE_DIR
(which the CMake file tests for, e.g. json's `nlohmann/json.hpp`), as CMake itself would unpack it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import requests

from ascend_setup.errors import AscendSetupError, StepFailed
from ascend_setup.index.download import download, each, sha256_of
from ascend_setup.sourcebuild.source import extract_tar

URL = re.compile(r"""https?://[^\s"')]+""")
INCLUDE = re.compile(r"""include\(\s*"?([^\s")]*third_party/([\w.-]+\.cmake))""")
PLACED_MARK = ".ascend-setup-placed"


@dataclass(frozen=True)
class Archive:
    name: str  # the file name, as CMake's DOWNLOAD_DIR would hold it
    url: str  # as the CMake file names it
    cmake_file: str  # where it was read, relative to the tree
    sha256: Optional[str]  # URL_HASH SHA256=... when the file gives one
    md5: Optional[str]  # URL_MD5 ... when the file gives one
    unpack_to: Optional[str]  # relative to csrc: where CMake looks for it unpacked (None: pkg/ is enough)
    strip_top: bool  # CMake drops a single top directory when it extracts (not DOWNLOAD_NO_EXTRACT)

    def hash_text(self) -> str:
        if self.sha256:
            return f"sha256 {self.sha256} (from {self.cmake_file})"
        if self.md5:
            return f"md5 {self.md5} (from {self.cmake_file})"
        return f"no hash in {self.cmake_file}"


def _included(csrc: Path) -> List[str]:
    """third_party/*.cmake files that csrc's CMake includes outside test-only branches."""
    found: List[str] = []
    for cmake in [csrc / "CMakeLists.txt", *sorted((csrc / "cmake").glob("*.cmake"))]:
        if not cmake.is_file():
            continue
        conditions: List[str] = []
        for line in cmake.read_text(errors="replace").splitlines():
            code = line.split("#", 1)[0].strip()
            low = code.lower()
            if low.startswith("if"):
                conditions.append(code)
            elif low.startswith("endif") and conditions:
                conditions.pop()
            match = INCLUDE.search(code)
            if match and not any("TEST" in c.upper() for c in conditions) and match.group(2) not in found:
                found.append(match.group(2))
    return found


def _variables(text: str) -> Dict[str, str]:
    values = {"CANN_3RD_LIB_PATH": "third_party", "PROJECT_SOURCE_DIR": ".", "CMAKE_CURRENT_SOURCE_DIR": "."}
    for name, value in re.findall(r"set\(\s*(\w+)\s+\"?([^\s\")]+)\"?\s*\)", text):
        values.setdefault(name, value)
    return values


def _expand(value: str, variables: Dict[str, str]) -> str:
    for _ in range(5):
        value = re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), m.group(0)), value)
    return value


def read_archives(tree: Path) -> List[Archive]:
    """Every archive the tree's operator build would download (empty for a tree without csrc's CMake)."""
    csrc = tree / "csrc"
    archives = []
    for name in _included(csrc):
        path = csrc / "cmake" / "third_party" / name
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        urls = [u for u in URL.findall(text) if "${" not in u]
        if not urls:
            continue
        url = urls[0]
        sha = re.search(r"URL_HASH\s+SHA256=([0-9a-fA-F]{64})", text)
        md5 = re.search(r"URL_MD5\s+([0-9a-fA-F]{32})", text)
        unpack_to = None
        if not re.search(r"EXISTS\s+\"\$\{CANN_3RD_LIB_PATH\}/pkg/", text):
            source = re.search(r"SOURCE_DIR\s+\"?([^\s\")]+)", text)
            if source:
                unpack_to = os.path.normpath(_expand(source.group(1), _variables(text)))
        archives.append(
            Archive(
                name=url.rsplit("/", 1)[-1],
                url=url,
                cmake_file=str(path.relative_to(tree)),
                sha256=sha.group(1).lower() if sha else None,
                md5=md5.group(1).lower() if md5 else None,
                unpack_to=unpack_to,
                strip_top="DOWNLOAD_NO_EXTRACT" not in text,
            )
        )
    return archives


def source_url(archive: Archive, mirror: Optional[str]) -> str:
    """Where to fetch it: the CMake file's URL, or `<mirror>/<name>` (`--build-deps-url`)."""
    return f"{mirror.rstrip('/')}/{archive.name}" if mirror else archive.url


def _verified(path: Path, archive: Archive) -> bool:
    if not path.is_file():
        return False
    if archive.md5 and not archive.sha256:
        digest = hashlib.md5(usedforsecurity=False)
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest() == archive.md5
    return archive.sha256 is None or sha256_of(path) == archive.sha256


def _reachable(url: str, timeout: float) -> Optional[str]:
    """None when `url` answers 2xx/3xx to HEAD (or GET, for servers that refuse HEAD); else why not."""
    try:
        response = requests.head(url, timeout=timeout, allow_redirects=True)
        if response.status_code in (403, 405, 501):
            response = requests.get(url, timeout=timeout, stream=True)
            response.close()
    except requests.RequestException as exc:
        return f"{url}: {exc.__class__.__name__}"
    return None if response.status_code < 400 else f"{url}: HTTP {response.status_code}"


def gate(archives: Sequence[Archive], cache: Path, mirror: Optional[str], timeout: float = 10.0) -> None:
    """Before any download: every archive not yet fetched must be reachable; all failures at once."""
    todo = [a for a in archives if not _verified(cache / a.name, a)]
    if not todo:
        return
    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        failures = [f for f in pool.map(lambda a: _reachable(source_url(a, mirror), timeout), todo) if f]
    if failures:
        names = ", ".join(a.name for a in todo)
        raise StepFailed(
            f"{len(failures)} third-party archive(s) of the operator build cannot be fetched: " + "; ".join(failures),
            hint=f"pass --build-deps-url URL, a directory that serves {names}, or copy them into {cache}",
        )


def fetch(
    archives: Sequence[Archive],
    cache: Path,
    mirror: Optional[str],
    on_progress: Optional[Callable[[str, int, Optional[int]], None]] = None,
) -> List[str]:
    """Download the archives into `cache` at once (pip would not; each resumes its own `.part` file);
    return one log line per archive."""
    cache.mkdir(parents=True, exist_ok=True)

    def one(archive: Archive) -> str:
        dest = cache / archive.name
        if not _verified(dest, archive):
            if dest.exists():
                dest.unlink()  # ours, and not what the CMake file names
            try:
                download(
                    [source_url(archive, mirror)],
                    dest,
                    sha256=archive.sha256,
                    on_progress=partial(on_progress, archive.name) if on_progress else None,
                )
            except AscendSetupError as exc:
                raise StepFailed(
                    f"{archive.name} could not be fetched ({exc.message}); {archive.hash_text()}",
                    hint=exc.hint or "check the mirror given by --build-deps-url",
                ) from None
            if not _verified(dest, archive):
                dest.unlink()
                raise StepFailed(
                    f"{archive.name} from {source_url(archive, mirror)} does not match its {archive.hash_text()}",
                    hint="check the mirror given by --build-deps-url",
                )
        recorded = "" if archive.sha256 else f", its sha256 is {sha256_of(dest)}"
        return f"third-party {archive.name}: {archive.hash_text()}{recorded}"

    return each(one, archives)


def place(archives: Sequence[Archive], cache: Path, tree: Path) -> None:
    """Put each fetched archive where the tree's CMake finds it without a download."""
    pkg = tree / "csrc" / "third_party" / "pkg"
    pkg.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        target = pkg / archive.name
        if not (target.is_file() and target.stat().st_size == (cache / archive.name).stat().st_size):
            shutil.copyfile(cache / archive.name, target.with_name(target.name + ".tmp"))
            os.replace(target.with_name(target.name + ".tmp"), target)
        if archive.unpack_to:
            _unpack(cache / archive.name, tree / "csrc" / archive.unpack_to, archive.strip_top)


def _unpack(archive: Path, dest: Path, strip_top: bool) -> None:
    if (dest / PLACED_MARK).exists():
        return
    if dest.exists():
        if any(dest.iterdir()):
            return  # the sdist (or the user) brought it: CMake will use it as it is
        dest.rmdir()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".unpacking-") as tmp:
        staging = Path(tmp) / "x"
        staging.mkdir()
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    if not str((staging / member).resolve()).startswith(str(staging.resolve()) + os.sep):
                        raise StepFailed(f"{archive.name} has a member outside its root: {member}")
                z.extractall(staging)
        else:
            extract_tar(archive, staging)
        entries = list(staging.iterdir())
        top = entries[0] if strip_top and len(entries) == 1 and entries[0].is_dir() else staging
        (top / PLACED_MARK).write_text(archive.name + "\n")
        os.replace(top, dest)
