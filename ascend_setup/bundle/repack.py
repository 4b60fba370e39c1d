"""An installed distribution packed back into the wheel it was installed from.

`bundle` must carry the tool itself. Run from a checkout, the tool builds its wheel from the tree; but the
README installs it with `pip install .` into a venv of its own, and that venv holds no source tree, only the
installed files. Those files, with their dist-info, are the wheel again: pip's RECORD lists every one with its
sha256, so a file changed since the install is caught here rather than shipped. The bytes are reproducible:
members in RECORD's order, zip times fixed at 1980-01-01 (zipfile's default).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Dict, List

from packaging.utils import canonicalize_name

from ascend_setup.errors import AscendSetupError

#: What an installer adds to a dist-info; a wheel does not carry them (RECORD is written anew).
INSTALLER_FILES = ("INSTALLER", "REQUESTED", "RECORD", "direct_url.json")


def wheel_tag(wheel_text: str) -> str:
    """The compressed tag set (`py3-none-any`, `cp311-cp311-manylinux_2_17_x86_64`) of a WHEEL file's `Tag:` lines."""
    parts: List[List[str]] = [[], [], []]
    for line in wheel_text.splitlines():
        if line.startswith("Tag:"):
            for part, into in zip(line.split(":", 1)[1].strip().split("-"), parts):
                if part not in into:
                    into.append(part)
    return "-".join(".".join(x) for x in parts)


def record_hash(data: bytes) -> str:
    """A RECORD entry's hash field (urlsafe base64 of the sha256, unpadded)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(dist: metadata.Distribution, out: Path, *, keep_requires_python: bool = True) -> Path:
    """`dist` as a wheel in `out`. Console-script launchers are left out (the installer writes them from
    entry_points.txt); other scripts go to `.data/scripts/`. A file that no longer matches RECORD's hash, or
    a distribution installed without files (an editable install), is an error naming it."""
    name, version = dist.metadata["Name"], dist.version
    files = list(dist.files or [])
    info_dirs = [str(f).split("/")[0] for f in files if str(f).split("/")[0].endswith(".dist-info")]
    if not info_dirs or not any(
        not str(f).startswith(("..", info_dirs[0])) and not str(f).endswith(".pth") for f in files
    ):
        raise AscendSetupError(
            f"{name} {version} is installed without its files here (an editable install?), so "
            "it cannot be packed into a wheel",
            hint="install it with 'pip install .'",
        )
    info_dir = info_dirs[0]
    scripts = {e.name for e in dist.entry_points if e.group in ("console_scripts", "gui_scripts")}
    stem = canonicalize_name(name).replace("-", "_")
    members: Dict[str, bytes] = {}
    for f in files:
        text = str(f)
        if (
            "__pycache__" in text
            or text.endswith(".pyc")
            or (text.startswith(info_dir + "/") and text.split("/")[-1] in INSTALLER_FILES)
        ):
            continue
        if text.startswith(".."):
            if Path(text).name in scripts:
                continue
            member = f"{stem}-{version}.data/scripts/{Path(text).name}"
        else:
            member = text
        data = Path(str(dist.locate_file(f))).read_bytes()
        if f.hash is not None and record_hash(data) != f"{f.hash.mode}={f.hash.value}":
            raise AscendSetupError(
                f"{dist.locate_file(f)} differs from what {name} {version} installed (RECORD's "
                "sha256), so the wheel would not be the one installed",
                hint=f"reinstall {name}, then run this again",
            )
        if member == f"{info_dir}/METADATA" and not keep_requires_python:
            data = b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(b"Requires-Python:"))
        members[member] = data
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for member, data in members.items():
        writer.writerow([member, record_hash(data), len(data)])
    writer.writerow([f"{info_dir}/RECORD", "", ""])
    members[f"{info_dir}/RECORD"] = record.getvalue().encode()
    wheel = out / f"{stem}-{version}-{wheel_tag(members[f'{info_dir}/WHEEL'].decode())}.whl"
    part = wheel.with_name(wheel.name + ".part")
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            info = zipfile.ZipInfo(member)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if ".data/scripts/" in member else 0o100644) << 16
            archive.writestr(info, data)
    os.replace(part, wheel)
    return wheel
