"""manifest.json: what a bundle holds (every file with its size, sha256 and role), for which row and target,
made by which version of the tool, and when. `verify` checks a bundle against it."""

from __future__ import annotations

import tarfile
from functools import partial
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_setup.bundle.tarball import checked_members, open_tar, read_member
from ascend_setup.errors import BadInput
from ascend_setup.index.download import sha256_of
from ascend_setup.resolve.lockfile import MinorVersion, Sha256
from ascend_setup.utils.files import atomic_write_text
from ascend_setup.utils.inputs import RelativePath, parse_json, path_inside, read_input_text

MANIFEST = "manifest.json"
LOCK = "lock.txt"
BOOTSTRAP = "bootstrap.sh"
PYTHONS = "python"  # a managed CPython build's archive, for a host with no interpreter in the row's range
BUNDLED_BUILDS = "builds.json"  # in PYTHONS: the pinned builds file naming just that build
#: Where each kind of file lives in a bundle (relative to its root).
FILES, THIRD_PARTY, WHEELHOUSE, TOOL = "files", "third-party", "wheelhouse", "tool"
#: The largest file a bundle may list (a CPU torch wheel is ~200 MB, a CANN toolkit ~5 GB).
MAX_FILE = 1 << 40
Role = Literal["lock", "package", "third-party", "built-wheel", "tool", "tool-dependency", "bootstrap", "python"]


class BundleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: RelativePath  # relative to the bundle's root, with '/' (never leaving it)
    size: int = Field(strict=True, ge=0, le=MAX_FILE)
    sha256: Sha256
    role: Role
    package: Optional[str] = None
    version: Optional[str] = None


class Missing(BaseModel):
    """A file of the closure the bundle could not get, and why (an index that could not be reached)."""

    model_config = ConfigDict(extra="forbid")

    package: str
    version: Optional[str] = None
    index: Optional[str] = None
    reason: str


class BundleTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arch: str
    glibc: str
    python: MinorVersion
    device: Optional[str] = None  # the NPU device type the lock was resolved for
    soc: Optional[str] = None  # the SOC_VERSION, when --soc named one (a built wheel is for it only)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["ascend-setup-bundle"] = "ascend-setup-bundle"
    version: Literal[1] = 1
    tool_version: str
    created: str  # ISO 8601, UTC
    cann: str
    row: Dict[str, Any]  # the matrix row as it was used (a derived row too: `derived` says so)
    derived: Optional[str] = None  # the provenance line of a row derived from the index's metadata
    target: BundleTarget
    lock: str = LOCK
    files: List[BundleFile]
    missing: List[Missing] = Field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def entry(
    root: Path, path: Path, role: Role, package: Optional[str] = None, version: Optional[str] = None
) -> BundleFile:
    return BundleFile(
        path=path.relative_to(root).as_posix(),
        size=path.stat().st_size,
        sha256=sha256_of(path),
        role=role,
        package=package,
        version=version,
    )


def write_manifest(root: Path, manifest: Manifest) -> Path:
    path = root / MANIFEST
    atomic_write_text(path, manifest.model_dump_json(indent=2) + "\n")
    return path


def parse_manifest(text: str, where: str) -> Manifest:
    data = parse_json(text, where, hint="the bundle is damaged or not an ascend-setup bundle")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(
            f"{where} is not an ascend-setup bundle manifest at "
            f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}",
            hint="make the bundle again with 'ascend-setup bundle'",
        ) from None


def is_tar(path: Path) -> bool:
    return path.is_file() and tarfile.is_tarfile(path)


def read_manifest(bundle: Path, flag: str = "PATH") -> Manifest:
    """The manifest of a bundle directory or tar file; anything else is bad input."""
    if bundle.is_symlink():
        raise BadInput(f"{flag} {bundle} is a symbolic link; give the bundle itself")
    if bundle.is_dir():
        path = bundle / MANIFEST
        if not path.is_file():
            raise BadInput(
                f"{flag} {bundle} is not a bundle: it has no {MANIFEST}",
                hint="make one with 'ascend-setup bundle ... -o PATH'",
            )
        return parse_manifest(read_input_text(path, "bundle-manifest", follow=False), str(path))
    if not bundle.exists():
        raise BadInput(f"{flag} {bundle} does not exist")
    if not is_tar(bundle):
        raise BadInput(f"{flag} {bundle} is neither a bundle directory nor a bundle tar file")
    data = read_member(bundle, MANIFEST, "bundle-manifest", f"{flag} {bundle}")
    if data is None:
        raise BadInput(f"{flag} {bundle} is a tar file without {MANIFEST}: not a bundle")
    return parse_manifest(data.decode(errors="replace"), f"{bundle}:{MANIFEST}")


def check_files(root: Path, manifest: Manifest, flag: str = "PATH") -> List[str]:
    """One line per file of the manifest that is missing, of another size or of another sha256; an entry
    that leads out of the bundle through a link is bad input."""
    problems = []
    for i, f in enumerate(manifest.files):
        path = path_inside(root, f.path, f"{flag} {root}: {MANIFEST} files.{i}.path")
        if not path.is_file() or path.is_symlink():
            problems.append(f"missing: {f.path}")
        elif path.stat().st_size != f.size:
            problems.append(f"corrupt: {f.path} has {path.stat().st_size} bytes, the manifest says {f.size}")
        elif sha256_of(path) != f.sha256:
            problems.append(f"corrupt: {f.path} does not match its sha256 {f.sha256[:12]}...")
    return problems


def check_tar(bundle: Path, manifest: Manifest, flag: str = "PATH") -> List[str]:
    """`check_files` for a bundle tar, reading each member once, unpacking nothing; a member that could not
    be unpacked safely is bad input."""
    import hashlib

    wanted = {f.path: f for f in manifest.files}
    seen = set()
    problems = []
    with open_tar(bundle, f"{flag} {bundle}") as archive:
        for member in checked_members(archive, f"{flag} {bundle}"):
            f = wanted.get(member.name)
            if f is None or not member.isfile():
                continue
            seen.add(member.name)
            digest = hashlib.sha256()
            handle = archive.extractfile(member)
            assert handle is not None
            for block in iter(partial(handle.read, 1 << 20), b""):
                digest.update(block)
            if member.size != f.size:
                problems.append(f"corrupt: {f.path} has {member.size} bytes, the manifest says {f.size}")
            elif digest.hexdigest() != f.sha256:
                problems.append(f"corrupt: {f.path} does not match its sha256 {f.sha256[:12]}...")
    problems += [f"missing: {p}" for p in wanted if p not in seen]
    return problems


def verify_bundle(bundle: Path, flag: str = "PATH") -> Tuple[Manifest, List[str]]:
    """(manifest, problems) of a bundle directory or tar."""
    manifest = read_manifest(bundle, flag)
    return manifest, (check_tar(bundle, manifest, flag) if is_tar(bundle) else check_files(bundle, manifest, flag))
