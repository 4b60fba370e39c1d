"""`uv pip compile` for a machine that need not be this one.

pip cannot resolve for another platform's markers and tags; uv can (`--python-platform`,
`--python-version`). Named indexes are pinned per package with a generated pyproject.toml
(`[[tool.uv.index]] explicit = true` + `[tool.uv.sources]`): a package the row assigns to the Ascend
or PyTorch CPU index is fetched from there and nothing else is, which no command-line flag can say.
uv never downloads an interpreter here and reads no user configuration (`--no-config`).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from packaging.utils import canonicalize_name

from ascend_setup.errors import AscendSetupError
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.tags import Target
from ascend_setup.procs import capture

#: The manylinux levels uv's --python-platform knows, per architecture.
UV_GLIBC = ((2, 17), (2, 28), (2, 31), (2, 32), (2, 33), (2, 34), (2, 35), (2, 36), (2, 37), (2, 38),
            (2, 39), (2, 40))
ROOT_PROJECT = "ascend-setup-closure"
_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*(?:#\s*via\s+(.*))?$")


class ResolutionFailed(AscendSetupError):
    """The resolver found no set of versions that meets every requirement (its own explanation kept)."""


@dataclass
class ClosureRequest:
    """What to resolve: root requirements, row pins that nothing may move, packages kept out, and
    which named index serves which package."""

    target: Target
    default_index: str
    roots: List[str]
    overrides: List[str] = field(default_factory=list)
    excludes: List[str] = field(default_factory=list)
    extra_index_urls: List[str] = field(default_factory=list)
    named_indexes: Mapping[str, str] = field(default_factory=dict)  # name -> url
    sources: Mapping[str, str] = field(default_factory=dict)  # package -> index name


@dataclass
class Resolved:
    name: str
    version: str
    parents: List[str]  # names of the packages that require it; ROOT_PROJECT for a root


def uv_platform(target: Target) -> str:
    """The largest manylinux level uv knows that the target's glibc can take."""
    fitting = [g for g in UV_GLIBC if g <= target.glibc_tuple] or [UV_GLIBC[0]]
    major, minor = max(fitting)
    return f"{target.arch}-manylinux_{major}_{minor}"


def _toml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def pyproject_text(request: ClosureRequest) -> str:
    """A throwaway project whose dependencies are the roots: the only way to pin packages to indexes."""
    lines = ["[project]", f'name = "{ROOT_PROJECT}"', 'version = "0"',
             f"dependencies = {_toml_list(request.roots)}", "", "[tool.uv]",
             f"override-dependencies = {_toml_list(request.overrides)}", ""]
    for name, url in request.named_indexes.items():
        lines += ["[[tool.uv.index]]", f"name = {json.dumps(name)}", f"url = {json.dumps(url)}", "explicit = true", ""]
    if request.sources:
        lines.append("[tool.uv.sources]")
        lines += [f"{json.dumps(pkg)} = {{ index = {json.dumps(index)} }}" for pkg, index in request.sources.items()]
    return "\n".join(lines) + "\n"


def parse_compiled(text: str) -> List[Resolved]:
    """`name==version  # via a, b` lines of uv's output (line annotations)."""
    found = []
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        parents = [p.strip().split(" ")[0] for p in (match.group(3) or "").split(",") if p.strip()]
        found.append(Resolved(canonicalize_name(match.group(1)), match.group(2),
                              [ROOT_PROJECT if p in (ROOT_PROJECT, "-r") else canonicalize_name(p) for p in parents]))
    return found


def failure_block(stderr: str) -> List[str]:
    """The resolver's own explanation ('No solution found ...' and what follows), without its noise."""
    lines = [l.rstrip() for l in stderr.splitlines() if l.strip()]
    start = next((i for i, l in enumerate(lines) if "No solution found" in l), None)
    if start is not None:
        return lines[start:start + 25]
    errors = [l for l in lines if l.lstrip().startswith(("error:", "×", "Caused by", "cause:", "╰─▶"))]
    return (errors or lines)[-12:]


def compile_closure(request: ClosureRequest, *, uv: Sequence[str], network: PipSettings,
                    cache_dir: Optional[Path] = None, timeout: float = 600) -> List[Resolved]:
    """Resolve `request` with uv. Raises ResolutionFailed with uv's explanation when there is no solution."""
    with tempfile.TemporaryDirectory(prefix="ascend-setup-resolve-") as tmp:
        project = Path(tmp) / "pyproject.toml"
        project.write_text(pyproject_text(request), encoding="utf-8")
        argv = [*uv, "pip", "compile", str(project), "--no-config", "--quiet", "--no-header",
                "--annotation-style", "line", "--python-version", request.target.python,
                "--python-platform", uv_platform(request.target), "--default-index", request.default_index,
                "--index-strategy", "unsafe-best-match"]
        for url in request.extra_index_urls:
            argv += ["--index", url]
        if request.excludes:
            excludes = Path(tmp) / "excludes.txt"
            excludes.write_text("\n".join(request.excludes) + "\n", encoding="utf-8")
            argv += ["--excludes", str(excludes)]
        argv += ["--cache-dir", str(cache_dir)] if cache_dir else ["--no-cache"]
        proc = capture(argv, env=network.uv_env(), timeout=timeout, cwd=Path(tmp))
    if proc.returncode != 0:
        block = failure_block(proc.stderr)
        raise ResolutionFailed(f"uv found no installable set of versions for {request.target.describe()}: "
                               f"{block[0] if block else 'exit ' + str(proc.returncode)}",
                               hint="the lines above are uv's explanation", details="\n".join(block))
    return parse_compiled(proc.stdout)
