"""`install --bundle`: a bundle in place of every index. Its manifest is checked against this host and the
row before anything is touched (another target, row or SOC is bad input); a tar is unpacked once into the
workdir; its files answer for every index URL of its lock (a PageSource behind the IndexSession), so the
gate and the Python choice read the bundle and no request leaves the machine."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from packaging.utils import canonicalize_name

from ascend_setup.bundle.manifest import (
    BUNDLED_BUILDS,
    FILES,
    LOCK,
    MANIFEST,
    PYTHONS,
    THIRD_PARTY,
    WHEELHOUSE,
    Manifest,
    is_tar,
)
from ascend_setup.bundle.tarball import check_tar_members, extract, read_member
from ascend_setup.errors import BadInput, StepFailed
from ascend_setup.index.download import sha256_of
from ascend_setup.index.simple import IndexFile, ProjectPage, SharedPages, make_file
from ascend_setup.managed.pinned import PythonBuild, load_builds, parse_builds
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.soc import device_of, label
from ascend_setup.resolve.lockfile import Lock, parse_lock, read_lock
from ascend_setup.utils.inputs import decode_text, path_inside

FLAG = "--bundle"
UNPACKED_MARK = ".ascend-setup-unpacked"


@dataclass(frozen=True)
class Bundle:
    """An unpacked bundle (a directory), read only."""

    root: Path

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK

    @property
    def files(self) -> Path:
        """The lock's files, flat: the --find-links directory of every package step."""
        return self.root / FILES

    @property
    def third_party(self) -> Path:
        return self.root / THIRD_PARTY

    @property
    def wheelhouse(self) -> Path:
        return self.root / WHEELHOUSE

    @property
    def python_builds(self) -> Optional[Path]:
        """The pinned builds file naming the CPython build the bundle carries (--with-python), or None."""
        path = self.root / PYTHONS / BUNDLED_BUILDS
        return path if path.is_file() else None

    def python_archive(self, build: PythonBuild) -> Optional[Path]:
        """The bundle's archive of a managed CPython build (a bundle made for a host with no interpreter in the
        row's range carries it), or None."""
        path = self.root / PYTHONS / build.file
        return path if path.is_file() else None

    def file(self, name: str, sha256: Optional[str]) -> Path:
        """A file of the lock, checked against its sha256 (a bundle damaged since it was made fails here)."""
        path = self.files / name
        if not path.is_file():
            raise StepFailed(
                f"the bundle {self.root} has no {FILES}/{name}",
                hint=f"check it: ascend-setup bundle verify {self.root}",
            )
        if sha256 and sha256_of(path) != sha256:
            raise StepFailed(
                f"{path} does not match the lock's sha256 {sha256[:12]}...",
                hint=f"check it: ascend-setup bundle verify {self.root}",
            )
        return path


def check_bundle(
    manifest: Manifest, path: Path, *, cann: str, row: Row, arch: str, glibc: str, soc: Optional[str]
) -> None:
    """A bundle made for this host's target, this row and these NPUs, with nothing missing; else exit 2."""
    t = manifest.target
    if manifest.cann != cann.strip():
        raise BadInput(
            f"{FLAG} {path} is for CANN {manifest.cann}, not --cann {cann}",
            hint=f"use --cann {manifest.cann}, or make a bundle for {cann}",
        )
    if (t.arch, t.glibc) != (arch, glibc):
        raise BadInput(
            f"{FLAG} {path} was made for {t.arch} / glibc {t.glibc}; this host is {arch} / glibc {glibc}",
            hint=f"make one for this host: ascend-setup bundle --cann {cann} --arch {arch} --glibc {glibc} "
            f"--python {t.python} -o PATH (on any connected machine)",
        )
    if dict(manifest.row.get("packages", {})) != dict(row.packages):
        theirs = manifest.row.get("packages", {})
        differ = sorted(n for n in set(theirs) | set(row.packages) if theirs.get(n) != row.packages.get(n))
        raise BadInput(
            f"{FLAG} {path} was made for another row of CANN {cann}: it differs in {', '.join(differ[:5])}",
            hint="make the bundle again with this matrix (--matrix FILE)",
        )
    if soc:
        if t.soc and t.soc != soc:
            raise BadInput(
                f"{FLAG} {path} was made for SOC {t.soc}; this host's is {soc}",
                hint=f"make one for it: ascend-setup bundle ... --soc {soc}",
            )
        device = device_of(soc)
        if t.device and device and t.device != device:
            raise BadInput(
                f"{FLAG} {path} was made for {label(t.device)} NPUs; this host's {soc} is {label(device)}",
                hint=f"make one for it: ascend-setup bundle ... --soc {label(device)}",
            )
    if manifest.missing:
        names = ", ".join(m.package for m in manifest.missing)
        raise BadInput(
            f"{FLAG} {path} is incomplete: {names} could not be fetched when it was made",
            hint="make it again where every index of the row can be reached (a rerun fetches only those)",
        )


def check_contents(bundle: Path, manifest: Manifest) -> None:
    """What `install --bundle` will read of the bundle, checked before anything is created or unpacked: every
    member of a tar (see tarball), every manifest entry of a directory inside it, the lock a lock, and the
    builds file (--with-python) a builds file. Anything else is bad input naming the member or field."""
    what = f"{FLAG} {bundle}"
    if bundle.is_dir():
        for i, f in enumerate(manifest.files):
            path_inside(bundle, f.path, f"{what}: {MANIFEST} files.{i}.path")
        read_lock(bundle / LOCK, FLAG)
        if (bundle / PYTHONS / BUNDLED_BUILDS).is_file():
            load_builds(str(bundle / PYTHONS / BUNDLED_BUILDS))
        return
    check_tar_members(bundle, what)
    lock = read_member(bundle, LOCK, "lock", what)
    if lock is None:
        raise BadInput(f"{what} has no {LOCK}", hint="make the bundle again with 'ascend-setup bundle'")
    parse_lock(decode_text(lock, f"{what}:{LOCK}"), f"{what}:{LOCK}")
    builds = read_member(bundle, f"{PYTHONS}/{BUNDLED_BUILDS}", "python-builds", what)
    if builds is not None:
        parse_builds(builds, f"{what}:{PYTHONS}/{BUNDLED_BUILDS}")


def _tar_manifest_sha(tar: Path) -> str:
    import hashlib

    data = read_member(tar, MANIFEST, "bundle-manifest", f"{FLAG} {tar}")
    return hashlib.sha256(data).hexdigest() if data is not None else ""


def unpack(tar: Path, dest: Path) -> Path:
    """The tar unpacked into `dest` once (a staging dir renamed when whole); reused while it holds the tar's
    manifest. An unpacked bundle of another manifest is ours, and replaced."""
    wanted = _tar_manifest_sha(tar)
    mark = dest / UNPACKED_MARK
    if (
        mark.is_file()
        and (dest / MANIFEST).is_file()
        and mark.read_text().strip() == wanted == sha256_of(dest / MANIFEST)
    ):
        return dest
    if dest.exists() and not mark.is_file():
        raise BadInput(
            f"{dest} exists and was not unpacked by ascend-setup",
            hint="move it away; ascend-setup never deletes what it did not create",
        )
    staging = dest.with_name(f".unpacking-{dest.name}")
    if staging.exists():
        shutil.rmtree(staging)  # ours: a kill stopped the last unpacking
    staging.mkdir(parents=True)
    extract(tar, staging, f"{FLAG} {tar}")
    (staging / UNPACKED_MARK).write_text(wanted + "\n")
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(staging, dest)
    return dest


def read_tar_lock(tar: Path, into: Path) -> Path:
    """The lock of a bundle tar, alone (a dry run unpacks nothing else)."""
    data = read_member(tar, LOCK, "lock", f"{FLAG} {tar}")
    if data is None:
        raise BadInput(f"{FLAG} {tar} has no {LOCK}")
    into.write_bytes(data)
    return into


class BundlePages:
    """The project pages of a bundle: for any index URL of its lock, the files the bundle holds."""

    def __init__(self, bundle: Bundle, lock: Lock) -> None:
        self._files: Dict[str, List[IndexFile]] = {}
        for p in lock.packages:
            if p.file and (bundle.files / p.file).is_file():
                f = make_file(p.file, (bundle.files / p.file).as_uri(), str(bundle.files), sha256=p.sha256, size=p.size)
                if f is not None:
                    self._files.setdefault(canonicalize_name(p.name), []).append(f)

    def project(self, name: str) -> ProjectPage:
        files = self._files.get(canonicalize_name(name), [])
        return ProjectPage(canonicalize_name(name), "bundle", list(files), found=bool(files))


def bundle_pages(bundle: Bundle, lock: Lock) -> SharedPages:
    """Pages for every index URL of the lock, answered by the bundle."""
    source = BundlePages(bundle, lock)
    return SharedPages(sources={url: source for url in [*lock.indexes.values(), *lock.extra_index_urls]})


def open_bundle(path: str, workdir: Path, *, dry_run: bool) -> Tuple[Optional[Path], Path]:
    """(the bundle directory, its lock file): a directory is used in place; a tar is unpacked into
    `<workdir>/bundle` (a dry run reads its lock only, into a temporary file)."""
    given = Path(path).expanduser().absolute()
    if given.is_dir():
        return given, given / LOCK
    if not is_tar(given):
        raise BadInput(f"{FLAG} {given} is neither a bundle directory nor a bundle tar file")
    if dry_run:
        import tempfile

        return None, read_tar_lock(given, Path(tempfile.mkdtemp(prefix="ascend-setup-bundle-")) / LOCK)
    root = unpack(given, workdir / "bundle")
    return root, root / LOCK
