"""Real, installable wheels and sdists built at test time (no network, no build backend needed)."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import textwrap
import zipfile
from pathlib import Path
from typing import Dict, Iterable, Optional

from packaging.utils import canonicalize_name


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def metadata_text(name: str, version: str, requires: Iterable[str] = (), requires_python: Optional[str] = None,
                  summary: str = "test stub") -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {summary}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n\n"


def build_wheel(out_dir: Path, name: str, version: str, *, tag: str = "py3-none-any", requires: Iterable[str] = (),
                requires_python: Optional[str] = None, files: Optional[Dict[str, str]] = None,
                build: Optional[str] = None) -> Path:
    """A wheel pip can install. `files` maps archive paths to text; default: an importable package."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(name).replace("-", "_")
    module = dist
    files = dict(files) if files is not None else {f"{module}/__init__.py": f"__version__ = {version!r}\n"}
    info = f"{dist}-{version}.dist-info"
    tags = tag.split("-")
    pys, abis, plats = (part.split(".") for part in tags)
    wheel_lines = ["Wheel-Version: 1.0", "Generator: ascend-setup-tests", "Root-Is-Purelib: " +
                   ("true" if plats == ["any"] else "false")]
    wheel_lines += [f"Tag: {p}-{a}-{pl}" for p in pys for a in abis for pl in plats]
    if build:
        wheel_lines.append(f"Build: {build}")
    contents = {path: text.encode() for path, text in files.items()}
    contents[f"{info}/METADATA"] = metadata_text(name, version, requires, requires_python).encode()
    contents[f"{info}/WHEEL"] = ("\n".join(wheel_lines) + "\n").encode()
    record = [f"{p},{_record_hash(d)},{len(d)}" for p, d in contents.items()] + [f"{info}/RECORD,,"]
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    filename = f"{dist}-{version}{'-' + build if build else ''}-{tag}.whl"
    path = out_dir / filename
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in contents.items():
            archive.writestr(member, data)
    return path


def build_sdist(out_dir: Path, name: str, version: str, *, requires: Iterable[str] = (),
                setup_py: Optional[str] = None, extra_files: Optional[Dict[str, str]] = None,
                requires_python: Optional[str] = None) -> Path:
    """A setuptools sdist; its setup.py installs a package named after the project by default."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(name).replace("-", "_")
    base = f"{dist}-{version}"
    requires = list(requires)
    setup_py = setup_py or textwrap.dedent(f"""\
        from setuptools import setup
        setup(name={name!r}, version={version!r}, packages=[{dist!r}], install_requires={requires!r})
        """)
    members = {
        "PKG-INFO": metadata_text(name, version, requires, requires_python),
        "setup.py": setup_py,
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
        f"{dist}/__init__.py": f"__version__ = {version!r}\n",
    }
    members.update(extra_files or {})
    path = out_dir / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, text in members.items():
            data = text.encode()
            tinfo = tarfile.TarInfo(f"{base}/{member}")
            tinfo.size = len(data)
            tinfo.mode = 0o755 if member.endswith(".sh") else 0o644
            archive.addfile(tinfo, io.BytesIO(data))
    return path
