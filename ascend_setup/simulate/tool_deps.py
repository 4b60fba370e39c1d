"""The tool's own dependencies on the stub main index: what `bundle` resolves for the target (the real index
serves the real wheels). A project the stack's stubs already serve at a version the tool accepts is left as it
is; the others get a stub at the version installed here. uv's stub carries a platform tag, as its real wheels
do, so the bundle's choice of uv's wheel for the target's platform is exercised."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import List

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from ascend_setup.bundle.tool import tool_requirements
from ascend_setup.simulate.dists import build_wheel

#: The platforms uv's stub wheel is published for.
UV_PLATFORMS = ("manylinux_2_17_x86_64.manylinux2014_x86_64", "manylinux_2_17_aarch64.manylinux2014_aarch64")


def _served(directory: Path) -> dict:
    versions: dict = {}
    for path in directory.iterdir():
        if path.name.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(path.name)
        elif path.name.endswith(".tar.gz"):
            name, version = parse_sdist_filename(path.name)
        else:
            continue
        versions.setdefault(canonicalize_name(name), []).append(version)
    return versions


def build_tool_dependencies(main: Path) -> List[Path]:
    """Stub wheels in `main` (the stub main index's directory) for each requirement of the tool it lacks."""
    served = _served(main)
    made = []
    for text in tool_requirements():
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if any(req.specifier.contains(v, prereleases=True) for v in served.get(name, [])):
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            version = next((str(v) for v in (Version("1.0"), Version("100.0")) if req.specifier.contains(v)), "1.0")
        if name == "uv":
            made += [build_wheel(main, name, version, tag=f"py3-none-{plat}") for plat in UV_PLATFORMS]
        else:
            made.append(build_wheel(main, name, version))
    return made
