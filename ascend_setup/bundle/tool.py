"""The tool itself in a bundle: this package's wheel, built reproducibly, and its dependencies as wheels for
the target's architecture and glibc, for every Python the bootstrap may find there (3.9 and up: the host's
interpreter makes the tool's venv, whatever the row's Python is). Resolved with uv as `plan` resolves the row."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.bundle.repack import repack
from ascend_setup.errors import AscendSetupError
from ascend_setup.index.choose import choose
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.simple import IndexPool, IndexSet
from ascend_setup.index.tags import Target
from ascend_setup.resolve.lockfile import Sha256
from ascend_setup.resolve.uvcompile import ClosureRequest, compile_closure
from ascend_setup.utils.inputs import FileName

DIST = "ascend-setup"
#: The Pythons a bootstrap may find on a host (the tool's own requires-python is >=3.8: Ubuntu 20.04's python3).
TOOL_PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")


class ToolFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    version: str
    file: FileName  # joined to the bundle's tool/
    url: str
    sha256: Optional[Sha256] = None
    size: Optional[int] = None


class ToolLock(BaseModel):
    """The tool's dependency wheels for one target, kept in the bundle so a rerun resolves nothing again."""

    model_config = ConfigDict(extra="forbid")

    arch: str
    glibc: str
    index: str
    files: List[ToolFile] = Field(default_factory=list)
    missing: Dict[str, str] = Field(default_factory=dict)  # "name==version (Python X.Y)" -> why no wheel


def tool_requirements() -> List[str]:
    """The tool's runtime requirements, as its installed metadata says (extras left out)."""
    reqs = [Requirement(r) for r in metadata.requires(DIST) or []]
    return [str(r) for r in reqs if not (r.marker and "extra" in str(r.marker))]


def resolve_tool(
    arch: str,
    glibc: str,
    index: str,
    *,
    settings: PipSettings,
    uv: Sequence[str],
    cache_dir: Optional[Path],
    pool: IndexPool,
) -> ToolLock:
    """Per Python of TOOL_PYTHONS: uv's closure of the tool's requirements for the target, then the wheel pip
    would take for each pin (uv's own wheel for the target's platform among them)."""
    lock = ToolLock(arch=arch, glibc=glibc, index=index)
    seen = set()
    indexes = IndexSet([index], pool=pool)
    for python in TOOL_PYTHONS:
        target = Target(glibc=glibc, arch=arch, python=python)
        request = ClosureRequest(target=target, default_index=index, roots=tool_requirements())
        for r in compile_closure(request, uv=uv, network=settings, cache_dir=cache_dir):
            choice = choose(
                r.name, tuple(indexes.pages(r.name)), SpecifierSet(f"=={r.version}"), target, binary_only=True
            )
            if choice.file is None:
                lock.missing[f"{r.name}=={r.version} (Python {python})"] = choice.reason or "no wheel"
                continue
            if choice.file.filename not in seen:
                seen.add(choice.file.filename)
                f = choice.file
                lock.files.append(
                    ToolFile(name=r.name, version=r.version, file=f.filename, url=f.url, sha256=f.sha256, size=f.size)
                )
    return lock


def source_tree() -> Optional[Path]:
    """This package's source tree when it runs from a checkout (pip install -e .), else None (installed)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "ascend_setup").is_dir() else None


def source_epoch(root: Path) -> str:
    """SOURCE_DATE_EPOCH for a reproducible wheel: the last commit's time, else pyproject.toml's mtime."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True, text=True, timeout=10
        )
        if out.returncode == 0 and out.stdout.strip().isdigit():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return str(int((root / "pyproject.toml").stat().st_mtime))


def tool_wheel(dest: Path, log: Path) -> Path:
    """This package's wheel in `dest`: built from its tree when it runs from a checkout, else its installed
    files packed back into the wheel they came from (the README's `pip install .` leaves no tree)."""
    root = source_tree()
    if root is None:
        dest.mkdir(parents=True, exist_ok=True)
        return repack(installed_tool(), dest)
    return build_tool_wheel(root, dest, log)


def installed_tool() -> metadata.Distribution:
    """The distribution whose files are running: the dist-info beside this package, not the first one of the
    name on sys.path (a PYTHONPATH can put another install's metadata first)."""
    site = Path(__file__).resolve().parents[2]
    for dist in metadata.distributions(path=[str(site)]):
        if canonicalize_name(dist.metadata["Name"] or "") == DIST:
            return dist
    raise AscendSetupError(
        f"no {DIST} metadata beside {site / 'ascend_setup'}, so the tool's wheel cannot be made",
        hint="install the tool with 'pip install .', or run bundle from a checkout",
    )


def build_tool_wheel(root: Path, dest: Path, log: Path) -> Path:
    """The wheel of the tree `root` in `dest`, built with no index and no build isolation (setuptools from this
    interpreter) and SOURCE_DATE_EPOCH set: the same tree gives the same bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({"SOURCE_DATE_EPOCH": source_epoch(root), "PIP_CONFIG_FILE": os.devnull, "PYTHONHASHSEED": "0"})
    with tempfile.TemporaryDirectory(prefix="ascend-setup-wheel-") as tmp:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "--wheel-dir",
            tmp,
            str(root),
        ]
        with log.open("a") as handle:
            proc = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=tmp, timeout=600)
        wheels = sorted(Path(tmp).glob("ascend_setup-*.whl"))
        if proc.returncode != 0 or not wheels:
            raise AscendSetupError(
                "the tool's own wheel could not be built",
                hint=f"see {log} (the setuptools "
                "pyproject.toml's build-system asks for must be installed beside ascend-setup)",
            )
        dest.mkdir(parents=True, exist_ok=True)
        final = dest / wheels[0].name
        shutil.copyfile(wheels[0], final.with_name(final.name + ".tmp"))
        os.replace(final.with_name(final.name + ".tmp"), final)
        return final
