"""The pinned CPython builds a managed interpreter is made from, and where each may be fetched.

Pinned, not uv's embedded list: that list changes with every uv release (a mirror that keeps one release
then answers 404 for the build a newer uv asks for), and a fleet must get the same interpreter on every host.
The file names the builds (one per minor and architecture) with their sha256 and the mirrors in the order
they are tried; `--python-builds FILE` replaces it (an organisation's own copy, or a test's loopback one)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Literal, Optional, Tuple
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from typing_extensions import Annotated  # typing has it from 3.9

from ascend_setup.utils.inputs import FileName, Name, PathText, Prose, load_model, parse_json, validate
from ascend_setup.utils.paths import PYTHON_BUILDS

#: --python's value that asks for a managed CPython even where the host has one in the row's range.
MANAGED = "managed"
PACKAGED_BUILDS = Path(__file__).resolve().parent.parent / "data" / "python_builds.json"
Sha256 = Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]
Version = Annotated[str, StringConstraints(strict=True, pattern=r"^3\.\d{1,2}\.\d{1,3}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Mirror(_Strict):
    url: PathText  # replaces the release prefix: <url>/<build>/<file>
    note: Prose = ""


class PythonBuild(_Strict):
    version: Version
    arch: Literal["x86_64", "aarch64"]
    build: Name  # the release tag (a date)
    file: FileName  # python-build-standalone's file name (the archive's name in downloads/python and a bundle)
    sha256: Sha256

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def key(self) -> str:
        """uv's name for it, which is also the folder uv unpacks it to."""
        return f"cpython-{self.version}-linux-{self.arch}-gnu"

    def url(self, prefix: str) -> str:
        return f"{prefix.rstrip('/')}/{self.build}/{quote(self.file)}"

    def python_in(self, install_dir: Path) -> Path:
        """The interpreter uv leaves for it under `install_dir` (UV_PYTHON_INSTALL_DIR)."""
        return install_dir / self.key / "bin" / f"python{self.minor}"


class PythonBuilds(_Strict):
    source: Prose  # where the builds and their hashes come from
    release: PathText  # the prefix each build's own URL starts with
    mirrors: List[Mirror] = Field(max_length=64)
    builds: List[PythonBuild] = Field(min_length=1, max_length=256)

    @field_validator("builds")
    @classmethod
    def _one_pin_each(cls, builds: List[PythonBuild]) -> List[PythonBuild]:
        """One build per minor and architecture (`find` takes one: a second pin would be silently ignored,
        or another host of the fleet would read the file the other way), and one build per archive name."""
        seen: Dict[Tuple[str, str], int] = {}
        files: Dict[str, int] = {}
        for i, b in enumerate(builds):
            first = seen.setdefault((b.minor, b.arch), i)
            if first != i:
                raise ValueError(f"builds.{first} and builds.{i} both pin CPython {b.minor} for {b.arch}")
            first = files.setdefault(b.file, i)
            if first != i:
                raise ValueError(f"builds.{first} and builds.{i} both name the archive {b.file!a}")
        return builds

    def find(self, minor: str, arch: str) -> Optional[PythonBuild]:
        return next((b for b in self.builds if b.minor == minor and b.arch == arch), None)

    def minors(self, arch: str) -> List[str]:
        return sorted({b.minor for b in self.builds if b.arch == arch})

    def prefixes(self, first: Optional[str] = None) -> List[str]:
        """The mirrors in the order they are tried: `first` (--python-mirror) before the file's own."""
        found = ([first] if first else []) + [m.url for m in self.mirrors]
        return list(dict.fromkeys(p.rstrip("/") for p in found))


def builds_path(explicit: Optional[str] = None) -> Tuple[Path, str]:
    """(the file, where it came from): --python-builds, then $ASCEND_SETUP_PYTHON_BUILDS, then the packaged one."""
    path, source = PYTHON_BUILDS.path(explicit)
    return (path, source) if path is not None else (PACKAGED_BUILDS, "the packaged builds")


def _hint(source: str) -> str:
    return f"{source} must list CPython builds as the packaged {PACKAGED_BUILDS.name} does"


def load_builds(explicit: Optional[str] = None) -> PythonBuilds:
    path, source = builds_path(explicit)
    return load_model(path, "python-builds", PythonBuilds, hint=_hint(source))


def parse_builds(data: bytes, where: str) -> PythonBuilds:
    """A builds file's bytes read from elsewhere (a bundle tar's member), checked as load_builds checks a file."""
    return validate(PythonBuilds, parse_json(data, where, hint=_hint(where)), where, hint=_hint(where))


def uv_downloads_json(build: PythonBuild, archive: Path) -> Dict[str, object]:
    """uv's downloads-list format (`UV_PYTHON_DOWNLOADS_JSON_URL`) with one entry: this build, from the
    archive already on disk (fetched and checked by the tool), its sha256 checked again by uv."""
    major, minor, patch = (int(p) for p in build.version.split("."))
    return {
        build.key: {
            "name": "cpython",
            "arch": {"family": build.arch, "variant": None},
            "os": "linux",
            "libc": "gnu",
            "major": major,
            "minor": minor,
            "patch": patch,
            "prerelease": "",
            "url": archive.absolute().as_uri(),
            "sha256": build.sha256,
            "variant": None,
            "build": build.build,
        }
    }
