"""A small bundle for this machine's target, written by hand (no index, no resolution): a lock of one wheel, the
wheel, a pinned builds file with its archive, and the manifest naming them; as a directory or a tar. Tests
change one part of it (a manifest entry, a lock's file, a builds file's name, a tar member) to see the tool
refuse exactly that part."""

from __future__ import annotations

import hashlib
import io
import json
import platform
import sys
import tarfile
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from ascend_setup.bundle.manifest import (
    BUNDLED_BUILDS,
    FILES,
    LOCK,
    MANIFEST,
    PYTHONS,
    BundleTarget,
    Manifest,
    entry,
    write_manifest,
)
from ascend_setup.host.machine import glibc_version
from ascend_setup.matrix import load_matrix
from ascend_setup.resolve.lockfile import DATA_PREFIX, Lock, LockedPackage, LockTarget

DEAD = "http://127.0.0.1:9/simple/"
WHEEL = "decorator-5.1.1-py3-none-any.whl"
ARCHIVE = "cpython-3.11.16+20260814-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz"
PYTHON = "%d.%d" % sys.version_info[:2]
SOC = "ascend910b3"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lock_doc(wheel: bytes) -> Dict[str, Any]:
    lock = Lock(
        cann="9.1.0",
        target=LockTarget(arch=platform.machine(), glibc=glibc_version() or "2.31", python=PYTHON),
        indexes={"mirror": DEAD},
        inputs="x",
        packages=[
            LockedPackage(
                name="decorator",
                version="5.1.1",
                outcome="wheel",
                index="mirror",
                file=WHEEL,
                url=DEAD + "decorator/" + WHEEL,
                sha256=_sha(wheel),
                size=len(wheel),
            )
        ],
    )
    return lock.to_json()


def builds_doc(archive: bytes) -> Dict[str, Any]:
    return {
        "source": "a test's pin",
        "release": "http://127.0.0.1:9/releases",
        "mirrors": [],
        "builds": [
            {"version": "3.11.16", "arch": "x86_64", "build": "20260814", "file": ARCHIVE, "sha256": _sha(archive)}
        ],
    }


Edit = Callable[[Dict[str, Any]], None]


def make_bundle(
    root: Path, *, lock: Optional[Edit] = None, builds: Optional[Edit] = None, manifest: Optional[Edit] = None
) -> Path:
    """The bundle directory `root`; each `Edit` changes its document (the lock's, the builds file's, the
    manifest's) before it is written."""
    wheel, archive = b"wheel bytes", b"archive bytes"
    (root / FILES).mkdir(parents=True)
    (root / PYTHONS).mkdir()
    (root / FILES / WHEEL).write_bytes(wheel)
    (root / PYTHONS / ARCHIVE).write_bytes(archive)
    lock_data, builds_data = lock_doc(wheel), builds_doc(archive)
    for edit, doc in ((lock, lock_data), (builds, builds_data)):
        if edit is not None:
            edit(doc)
    (root / LOCK).write_text(f"# a lock written by hand\n{DATA_PREFIX}{json.dumps(lock_data)}\n")
    (root / PYTHONS / BUNDLED_BUILDS).write_text(json.dumps(builds_data))
    row = load_matrix().rows["9.1.0"].for_arch(platform.machine())
    made = Manifest(
        tool_version="0",
        created="2026-12-01T00:00:00+00:00",
        cann="9.1.0",
        row=row.to_json(),
        target=BundleTarget(arch=platform.machine(), glibc=glibc_version() or "2.31", python=PYTHON),
        files=[
            entry(root, root / LOCK, "lock"),
            entry(root, root / FILES / WHEEL, "package", "decorator"),
            entry(root, root / PYTHONS / ARCHIVE, "python", "cpython"),
            entry(root, root / PYTHONS / BUNDLED_BUILDS, "python", "cpython"),
        ],
    )
    write_manifest(root, made)
    if manifest is not None:
        doc = json.loads((root / MANIFEST).read_text())
        manifest(doc)
        (root / MANIFEST).write_text(json.dumps(doc))
    return root


def tar_of(root: Path, tar: Path, *, extra: Optional[Callable[[tarfile.TarFile], None]] = None) -> Path:
    """`root` as a bundle tar (as `bundle --format tar` writes one); `extra` adds members of its own."""
    with tarfile.open(tar, "w") as archive:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            archive.add(path, arcname=path.relative_to(root).as_posix())
        if extra is not None:
            extra(archive)
    return tar


def add_file(archive: tarfile.TarFile, name: str, data: bytes = b"planted\n") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def add_link(archive: tarfile.TarFile, name: str, target: str, *, hard: bool = False) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    archive.addfile(info)
