"""The tool's own dependencies on an index of their own, for `bundle --tool-index-url`: what the real index
serves them as. For this machine they are real wheels, repacked from the distributions this interpreter has
installed (so a bundle's bootstrap.sh really installs and runs the tool with no index); for the other
architecture and the other Pythons of the bundle's range, stubs with the same names, versions and
requirements (so the bundle's choice of each platform's wheel, uv's among them, is exercised). One version of
each project is served, for every Python 3.9-3.13: the repacked METADATA leaves out Requires-Python."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Dict, Iterable, List

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascend_setup.bundle.tool import DIST, TOOL_PYTHONS, tool_requirements
from ascend_setup.simulate.dists import build_wheel

ARCHES = ("x86_64", "aarch64")
SKIPPED = ("INSTALLER", "REQUESTED", "RECORD", "direct_url.json")


def _env(python: str) -> Dict[str, str]:
    return {"python_version": python, "python_full_version": python + ".0", "extra": ""}


def _needed(requirements: Iterable[str], pythons: Iterable[str]) -> List[Requirement]:
    reqs = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate(_env(p)) for p in pythons):
            reqs.append(req)
    return reqs


def closure() -> tuple:
    """(installed distributions of the tool's requirements, recursively; requirements of them not installed)."""
    found: Dict[str, metadata.Distribution] = {}
    absent: Dict[str, Requirement] = {}
    queue = _needed(tool_requirements(), TOOL_PYTHONS)
    while queue:
        req = queue.pop()
        name = canonicalize_name(req.name)
        if name in found or name in absent or name == DIST:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            absent[name] = req
            continue
        found[name] = dist
        queue += _needed(dist.requires or [], TOOL_PYTHONS)
    return found, absent


def _tags(wheel_text: str) -> str:
    pys: List[str] = []
    abis: List[str] = []
    plats: List[str] = []
    for line in wheel_text.splitlines():
        if line.startswith("Tag:"):
            py, abi, plat = line.split(":", 1)[1].strip().split("-")
            for part, into in ((py, pys), (abi, abis), (plat, plats)):
                if part not in into:
                    into.append(part)
    return "-".join(".".join(x) for x in (pys, abis, plats))


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(dist: metadata.Distribution, out: Path) -> Path:
    """An installed distribution as the wheel it came from (console-script launchers left out: pip writes them)."""
    name, version = dist.metadata["Name"], dist.version
    scripts = {e.name for e in dist.entry_points if e.group in ("console_scripts", "gui_scripts")}
    info_dir = next(str(f).split("/")[0] for f in dist.files or [] if str(f).split("/")[0].endswith(".dist-info"))
    stem = canonicalize_name(name).replace("-", "_")
    members: Dict[str, bytes] = {}
    for f in dist.files or []:
        text = str(f)
        if "__pycache__" in text or text.endswith(".pyc") or text.split("/")[-1] in SKIPPED:
            continue
        if text.startswith(".."):
            if Path(text).name in scripts:
                continue
            member = f"{stem}-{version}.data/scripts/{Path(text).name}"
        else:
            member = text
        path = Path(str(dist.locate_file(f)))
        if not path.is_file():
            continue
        data = path.read_bytes()
        if member == f"{info_dir}/METADATA":
            data = b"".join(l for l in data.splitlines(keepends=True) if not l.startswith(b"Requires-Python:"))
        members[member] = data
    tag = _tags(members[f"{info_dir}/WHEEL"].decode())
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for member, data in members.items():
        writer.writerow([member, _hash(data), len(data)])
    writer.writerow([f"{info_dir}/RECORD", "", ""])
    members[f"{info_dir}/RECORD"] = record.getvalue().encode()
    wheel = out / f"{stem}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            info = zipfile.ZipInfo(member)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if ".data/scripts/" in member else 0o100644) << 16
            archive.writestr(info, data)
    return wheel


def _other_platforms(tag: str) -> List[str]:
    """The tags of the same wheel for the other architecture and, for a CPython-specific one, the other Pythons."""
    py, abi, plat = tag.split("-")
    if plat == "any":
        return []
    arch = next(a for a in ARCHES if a in plat)
    tags = set()
    for other in ARCHES:
        if abi in ("none", "abi3"):
            tags.add(f"{py}-{abi}-manylinux_2_17_{other}" if other != arch else "")
        else:
            for python in TOOL_PYTHONS:
                cp = "cp" + python.replace(".", "")
                if other != arch or cp not in py.split("."):
                    tags.add(f"{cp}-{cp}-manylinux_2_17_{other}")
    return sorted(t for t in tags if t)


def build_tool_index(out: Path) -> List[Path]:
    """Every wheel the tool's dependencies need, for both architectures and Pythons 3.9-3.13, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    found, absent = closure()
    made = []
    for dist in found.values():
        wheel = repack(dist, out)
        made.append(wheel)
        requires = list(dist.requires or [])
        for tag in _other_platforms(wheel.name[:-4].split("-", 2)[2]):
            made.append(build_wheel(out, dist.metadata["Name"], dist.version, tag=tag, requires=requires))
    for name, req in absent.items():
        version = next((str(v) for v in (Version("1.0"), Version("3.0"), Version("100.0"))
                        if req.specifier.contains(v, prereleases=True)), "1.0")
        made.append(build_wheel(out, name, version))
    return made
