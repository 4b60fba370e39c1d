"""Real, installable wheels and sdists built at test time (no network, no build backend needed)."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Union

from packaging.utils import canonicalize_name

from ascend_setup.bundle.repack import record_hash


def metadata_text(
    name: str,
    version: str,
    requires: Iterable[str] = (),
    requires_python: Optional[str] = None,
    summary: str = "test stub",
    description: str = "",
) -> str:
    """Core metadata; `description` is the body (a real project's README, which is where vllm-ascend names its CANN)."""
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {summary}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n\n" + description


def build_wheel(
    out_dir: Path,
    name: str,
    version: str,
    *,
    tag: str = "py3-none-any",
    requires: Iterable[str] = (),
    requires_python: Optional[str] = None,
    files: Optional[Mapping[str, Union[str, bytes]]] = None,
    build: Optional[str] = None,
    description: str = "",
) -> Path:
    """A wheel pip can install. `files` maps archive paths to text; default: an importable package."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(name).replace("-", "_")
    module = dist
    given: Dict[str, Union[str, bytes]] = (
        dict(files) if files is not None else {f"{module}/__init__.py": f"__version__ = {version!r}\n"}
    )
    info = f"{dist}-{version}.dist-info"
    tags = tag.split("-")
    pys, abis, plats = (part.split(".") for part in tags)
    wheel_lines = [
        "Wheel-Version: 1.0",
        "Generator: ascend-setup-simulate",
        "Root-Is-Purelib: " + ("true" if plats == ["any"] else "false"),
    ]
    wheel_lines += [f"Tag: {p}-{a}-{pl}" for p in pys for a in abis for pl in plats]
    if build:
        wheel_lines.append(f"Build: {build}")
    contents = {path: text if isinstance(text, bytes) else text.encode() for path, text in given.items()}
    contents[f"{info}/METADATA"] = metadata_text(
        name, version, requires, requires_python, description=description
    ).encode()
    contents[f"{info}/WHEEL"] = ("\n".join(wheel_lines) + "\n").encode()
    record = [f"{p},{record_hash(d)},{len(d)}" for p, d in contents.items()] + [f"{info}/RECORD,,"]
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    filename = f"{dist}-{version}{'-' + build if build else ''}-{tag}.whl"
    path = out_dir / filename
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in contents.items():
            entry = zipfile.ZipInfo(member)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (0o100755 if ".data/scripts/" in member else 0o100644) << 16  # pip keeps the x bit
            archive.writestr(entry, data)
    return path


#: Shipped inside every stub sdist: writes a pure-Python wheel (so builds need no setuptools or wheel).
WHEEL_WRITER = r'''
import base64, hashlib, zipfile
from pathlib import Path


def write_wheel(directory, dist, version, metadata, files):
    """Write dist-version-py3-none-any.whl from {archive path: bytes}; return its file name."""
    info = f"{dist}-{version}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = metadata
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    digest = lambda d: "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
    record = "".join(f"{p},{digest(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    filename = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(directory) / filename, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return filename
'''

#: A minimal in-tree PEP 517 backend for stub sdists.
SIMPLE_BACKEND = r'''
from pathlib import Path

from _wheel_writer import write_wheel

HERE = Path(__file__).resolve().parent


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    meta = (HERE / "PKG-INFO").read_bytes()
    fields = dict(l.split(": ", 1) for l in meta.decode().splitlines() if ": " in l)
    dist = fields["Name"].replace("-", "_")
    return write_wheel(wheel_directory, dist, fields["Version"], meta,
                       {f"{dist}/__init__.py": (HERE / dist / "__init__.py").read_bytes()})
'''


def build_sdist(
    out_dir: Path,
    name: str,
    version: str,
    *,
    requires: Iterable[str] = (),
    extra_files: Optional[Dict[str, str]] = None,
    requires_python: Optional[str] = None,
    description: str = "",
) -> Path:
    """An sdist with a tiny in-tree build backend; it builds an importable package named after the project."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(name).replace("-", "_")
    base = f"{dist}-{version}"
    members = {
        "PKG-INFO": metadata_text(name, version, list(requires), requires_python, description=description),
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "_backend"\nbackend-path = ["."]\n',
        "_backend.py": SIMPLE_BACKEND,
        "_wheel_writer.py": WHEEL_WRITER,
        f"{dist}/__init__.py": f"__version__ = {version!r}\n",
    }
    members.update(extra_files or {})
    path = out_dir / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, text in members.items():
            data = text.encode()
            tinfo = tarfile.TarInfo(f"{base}/{member}")
            tinfo.size = len(data)
            tinfo.mode = 0o644
            archive.addfile(tinfo, io.BytesIO(data))
    return path
