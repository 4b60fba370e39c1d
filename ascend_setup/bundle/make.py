"""`ascend-setup bundle`: fill a directory with every file an offline install of one target needs. Each file
goes through the install's own download (`.part` files, HTTP Range, the index's sha256), so a rerun after a
stop fetches only what is missing; the manifest is written last, when everything that could be had is there."""

from __future__ import annotations

import os
import shutil
import tarfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, ContextManager, List, Optional, Protocol, Sequence, Tuple

from ascend_setup import __version__
from ascend_setup.bundle import tool
from ascend_setup.bundle.bootstrap import bootstrap_text, write_checksums
from ascend_setup.bundle.manifest import (
    BOOTSTRAP,
    BUNDLED_BUILDS,
    FILES,
    LOCK,
    PYTHONS,
    THIRD_PARTY,
    TOOL,
    WHEELHOUSE,
    BundleFile,
    BundleTarget,
    Manifest,
    Missing,
    entry,
    write_manifest,
)
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.index.download import download, each
from ascend_setup.index.tags import Target
from ascend_setup.managed.pinned import PythonBuild, PythonBuilds
from ascend_setup.managed.uv_python import fetch_archive
from ascend_setup.matrix.models import Row
from ascend_setup.native.wheel_libs import glibc_lines
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.resolve.index_session import IndexSession
from ascend_setup.resolve.lockfile import Lock, LockTarget, read_lock, write_lock
from ascend_setup.sourcebuild import thirdparty
from ascend_setup.sourcebuild.source import cached_wheel, extract_once, wheelhouse_key
from ascend_setup.utils.files import atomic_write_text, fsync_dir, make_dir

#: Marks a directory this tool made as a bundle (one it may fill and resume).
MARK = ".ascend-setup-bundle"


@dataclass
class BundleRequest:
    out: Path  # the bundle directory (for --format tar, the directory the tar is made from)
    row: Row
    target: Target
    sources: IndexSources
    device: Optional[str] = None
    soc: Optional[str] = None
    derived: Optional[str] = None
    lock_file: Optional[Path] = None
    wheelhouse: Optional[Path] = None
    build_deps_url: Optional[str] = None
    build_python: Optional[str] = None
    tool_index: str = ""  # where the tool's own dependencies come from ("": the primary index)
    log: Path = field(default_factory=lambda: Path("/dev/null"))
    python_build: Optional[PythonBuild] = None  # --with-python: the managed CPython the bundle carries
    python_builds: Optional[PythonBuilds] = None  # ... and the pinned builds it is from
    python_mirror: Optional[str] = None  # --python-mirror: tried first for it


@dataclass
class Job:
    """One file to fetch into the bundle."""

    urls: List[str]
    dest: Path
    sha256: Optional[str]
    size: Optional[int]
    package: str
    version: Optional[str] = None
    index: Optional[str] = None


def open_out_dir(out: Path, flag: str = "-o") -> Path:
    """The bundle directory: new, or one this tool started (a rerun continues it); never someone else's."""
    if out.is_symlink():
        raise BadInput(f"{flag} {out} is a symbolic link; give the directory itself")
    if out.exists():
        if not out.is_dir():
            raise BadInput(f"{flag} {out} exists and is not a directory")
        if not (out / MARK).exists() and any(out.iterdir()):
            raise BadInput(
                f"{flag} {out} is a directory that is not empty and is not a bundle",
                hint="give a new or empty directory; ascend-setup never writes into one it did not make",
            )
    make_dir(out)
    atomic_write_text(out / MARK, f"ascend-setup {__version__} bundle\n")
    return out


def _lock_fits(lock: Lock, req: BundleRequest) -> bool:
    return (
        lock.cann == req.row.cann
        and lock.target == LockTarget.of(req.target, req.device)
        and lock.indexes == req.sources.as_dict()
    )


def take_lock(req: BundleRequest, index: IndexSession, say: Callable[[str], None]) -> Lock:
    """--lock FILE (for this target), else the lock a stopped run left in the bundle, else a resolution now."""
    path = req.out / LOCK
    if req.lock_file is not None:
        lock = read_lock(req.lock_file)
        made = (lock.target.arch, lock.target.glibc, lock.target.python)
        if lock.cann != req.row.cann or made != (req.target.arch, req.target.glibc, req.target.python):
            raise BadInput(
                f"--lock {req.lock_file} is for CANN {lock.cann} on {made[0]} / glibc {made[1]} / Python "
                f"{made[2]}, not the bundle's target {req.target.describe()} (CANN {req.row.cann})",
                hint="drop --lock, or give the --arch/--glibc/--python it was made for",
            )
        write_lock(lock, path)
        return lock
    if path.is_file():
        kept: Optional[Lock]
        try:
            kept = read_lock(path)
        except AscendSetupError:
            kept = None
        if kept is not None and _lock_fits(kept, req):
            say(f"continuing with the lock this bundle already holds ({LOCK})")
            return kept
    say(f"resolving the closure for {req.target.describe()}")
    lock = index.resolve(req.row, req.target, req.sources, build_python=req.build_python, device=req.device)
    write_lock(lock, path)
    return lock


def package_jobs(lock: Lock, out: Path) -> Tuple[List[Job], List[Missing]]:
    jobs, missing = [], []
    for p in lock.packages:
        if p.outcome == "unavailable" or not p.url or not p.file:
            missing.append(
                Missing(
                    package=p.name, version=p.version, index=p.index_url, reason=p.reason or "no file for the target"
                )
            )
            continue
        jobs.append(Job([p.url], out / FILES / p.file, p.sha256, p.size, p.name, p.version, p.index_url))
    return jobs, missing


class Transfer(Protocol):
    """What a person sees of the downloads (cli.progress.TransferProgress): bytes per file, files done."""

    def update(self, key: str, done: int) -> None: ...

    def finished(self, key: str, size: int) -> None: ...


#: Opens the progress of `files` files and `total` bytes for the length of the downloads.
TransferView = Callable[[int, int], ContextManager[Transfer]]


def fetch_all(jobs: Sequence[Job], progress: Transfer) -> List[Missing]:
    """Every job's file, several at a time (`download.each`: its bound per host); a file that cannot be had is
    named, the rest go on."""

    def one(job: Job) -> Optional[Missing]:
        key = str(job.dest)
        try:
            download(
                job.urls,
                job.dest,
                sha256=job.sha256,
                size=job.size,
                on_progress=lambda done, total: progress.update(key, done),
            )
        except BadInput:
            raise
        except AscendSetupError as exc:
            return Missing(package=job.package, version=job.version, index=job.index, reason=exc.message)
        progress.finished(key, job.dest.stat().st_size)
        return None

    return [m for m in each(one, jobs) if m is not None]


def third_party_archives(sdist: Path, out: Path) -> List[thirdparty.Archive]:
    """The archives the sdist's CMake files name (read from the sdist unpacked once in the bundle's work dir)."""
    work = make_dir(out / ".work")
    tree = extract_once(sdist, work)
    return thirdparty.read_archives(tree)


def built_wheel(wheelhouse: Path, row: Row, target: Target, soc: Optional[str]) -> Path:
    """The built vllm-ascend wheel in `wheelhouse` whose key is the target's (an install's wheelhouse layout)."""
    if not soc:
        raise BadInput("--wheelhouse needs --soc SOC_VERSION (e.g. ascend910b3): a built wheel is for one SOC only")
    key = wheelhouse_key(
        version=row.packages["vllm-ascend"],
        cann=row.cann,
        arch=target.arch,
        python=target.python,
        glibc=target.glibc,
        soc=soc,
    )
    wheel = cached_wheel(wheelhouse, key)
    if wheel is None:
        raise BadInput(
            f"--wheelhouse {wheelhouse} has no wheel for {key} (it looks in {wheelhouse}/{key}/)",
            hint="build one on a host of the target (install keeps it in <workdir>/wheelhouse)",
        )
    return wheel


def copy_into(source: Path, dest: Path) -> Path:
    if dest.is_file() and dest.stat().st_size == source.stat().st_size:
        return dest
    make_dir(dest.parent)
    shutil.copyfile(source, dest.with_name(dest.name + ".part"))
    dest.with_name(dest.name + ".part").replace(dest)
    return dest


def make_bundle(req: BundleRequest, index: IndexSession, view: TransferView, say: Callable[[str], None]) -> Manifest:
    """Fill `req.out`; the manifest (written last, atomically) lists what is there and names what is not."""
    out = req.out
    lock = take_lock(req, index, say)
    plugin = lock.get("vllm-ascend")
    built = (
        built_wheel(req.wheelhouse, req.row, req.target, req.soc)
        if req.wheelhouse is not None and plugin is not None and plugin.outcome == "sdist"
        else None
    )
    jobs, missing = package_jobs(lock, out)
    tool_lock = take_tool_lock(req, index, say)
    tool_jobs = [
        Job([f.url], out / TOOL / f.file, f.sha256, f.size, f.name, f.version, tool_lock.index) for f in tool_lock.files
    ]
    missing += [Missing(package=k, reason=v) for k, v in tool_lock.missing.items()]
    everything = jobs + tool_jobs
    with view(len(everything), sum(j.size or 0 for j in everything)) as progress:
        missing += fetch_all(jobs, progress)
        have = {j.sha256: j.dest for j in jobs if j.sha256 and j.dest.is_file()}
        for j in tool_jobs:  # a tool dependency the lock holds too is copied, not fetched again
            if j.sha256 in have and not j.dest.is_file():
                copy_into(have[j.sha256], j.dest)
        missing += fetch_all(tool_jobs, progress)
    for line in glibc_lines([j.dest for j in jobs if j.dest.suffix == ".whl" and j.dest.is_file()], req.target.glibc):
        say(line)  # what the wheels' libraries need, read from their ELF: tags can understate it
    archives: List[thirdparty.Archive] = []
    sdist = out / FILES / plugin.file if plugin is not None and plugin.outcome == "sdist" and plugin.file else None
    if sdist is not None and sdist.is_file():
        archives = third_party_archives(sdist, out)
        cache = make_dir(out / THIRD_PARTY)
        for archive in archives:  # each on its own: one host that cannot be reached does not cost the others
            try:
                for line in thirdparty.fetch([archive], cache, req.build_deps_url):
                    say(line)
            except AscendSetupError as exc:
                missing.append(
                    Missing(
                        package=archive.name,
                        index=thirdparty.source_url(archive, req.build_deps_url),
                        reason=exc.message,
                    )
                )
    if built is not None:
        key = built.parent.name
        copy_into(built, out / WHEELHOUSE / key / built.name)
    python_files = carry_python(req, say, missing)
    say("the tool's own wheel (reproducible: from its tree with SOURCE_DATE_EPOCH, or its installed files)")
    tool_wheel = tool.tool_wheel(make_dir(out / TOOL), req.log)
    manifest = Manifest(
        tool_version=__version__,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        cann=req.row.cann,
        row=req.row.to_json(),
        derived=req.derived,
        target=BundleTarget(
            arch=req.target.arch, glibc=req.target.glibc, python=req.target.python, device=req.device, soc=req.soc
        ),
        files=[],
        missing=missing,
    )
    files: List[BundleFile] = [entry(out, out / LOCK, "lock")]
    files += [entry(out, j.dest, "package", j.package, j.version) for j in jobs if j.dest.is_file()]
    files += [
        entry(out, out / THIRD_PARTY / a.name, "third-party", a.name)
        for a in archives
        if (out / THIRD_PARTY / a.name).is_file()
    ]
    if built is not None:
        files.append(
            entry(
                out,
                out / WHEELHOUSE / built.parent.name / built.name,
                "built-wheel",
                "vllm-ascend",
                plugin.version if plugin else None,
            )
        )
    files += [
        entry(out, f, "python", "cpython", req.python_build.version if req.python_build else None) for f in python_files
    ]
    files.append(entry(out, tool_wheel, "tool", tool.DIST, __version__))
    files += [entry(out, j.dest, "tool-dependency", j.package, j.version) for j in tool_jobs if j.dest.is_file()]
    write_checksums(out / TOOL, [f for f in files if f.role in ("tool", "tool-dependency")], out)
    atomic_write_text(out / BOOTSTRAP, bootstrap_text(manifest))
    (out / BOOTSTRAP).chmod(0o755)
    files.append(entry(out, out / BOOTSTRAP, "bootstrap"))
    manifest.files = files
    write_manifest(out, manifest)
    shutil.rmtree(out / ".work", ignore_errors=True)  # ours: the sdist unpacked to read its CMake files
    return manifest


def carry_python(req: BundleRequest, say: Callable[[str], None], missing: List[Missing]) -> List[Path]:
    """--with-python: the pinned build's archive (checked by its sha256) and a builds file naming just it, which
    the install on the target reads (the same pin wherever the bundle goes). What could not be fetched is
    missing, as a package would be."""
    build, builds = req.python_build, req.python_builds
    if build is None or builds is None:
        return []
    say(f"the managed CPython {build.version} ({build.build} build) for {build.arch}")
    try:
        archive = fetch_archive(builds, build, req.out, req.log, mirror=req.python_mirror)
    except AscendSetupError as exc:
        missing.append(Missing(package=f"cpython {build.version}", reason=exc.message))
        return []
    pinned = req.out / PYTHONS / BUNDLED_BUILDS
    atomic_write_text(pinned, builds.model_copy(update={"builds": [build]}).model_dump_json(indent=1) + "\n")
    return [archive, pinned]


def take_tool_lock(req: BundleRequest, index: IndexSession, say: Callable[[str], None]) -> tool.ToolLock:
    """The tool's dependency wheels for the target: kept in the bundle, so a rerun asks no index again."""
    path = req.out / TOOL / "tool-lock.json"
    mirror = req.tool_index or req.sources.mirror
    if path.is_file():
        try:
            kept = tool.ToolLock.model_validate_json(path.read_text())
        except ValueError:
            kept = None
        if kept is not None and (kept.arch, kept.glibc, kept.index) == (req.target.arch, req.target.glibc, mirror):
            return kept
    say(
        f"resolving the tool's own dependencies for {req.target.arch} / glibc {req.target.glibc}, Python "
        f"{tool.TOOL_PYTHONS[0]}-{tool.TOOL_PYTHONS[-1]}"
    )
    resolved = tool.resolve_tool(
        req.target.arch,
        req.target.glibc,
        mirror,
        settings=index.settings,
        uv=index.uv,
        cache_dir=index.cache,
        pool=index.pool(),
    )
    make_dir(path.parent)
    atomic_write_text(path, resolved.model_dump_json(indent=2) + "\n")
    return resolved


def write_tar(directory: Path, dest: Path) -> Path:
    """`directory`'s bundle as one uncompressed tar (wheels are compressed already), written beside `dest` and
    renamed: a stop never leaves a half tar under the name."""
    part = dest.with_name(dest.name + ".part")
    with tarfile.open(part, "w") as archive:
        for path in sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.endswith(".part")):
            name = path.relative_to(directory).as_posix()
            if name == MARK or name.startswith(".work/"):
                continue
            archive.add(path, arcname=name, recursive=False)
    with part.open("rb+") as handle:
        os.fsync(handle.fileno())
    part.replace(dest)
    fsync_dir(dest.parent)
    return dest


def staging_dir(tar_path: Path) -> Path:
    """Where a --format tar bundle is filled (and resumed) before the tar is written."""
    return tar_path.with_name(tar_path.name + ".parts")
