"""`uv pip compile` for a machine that need not be this one.

One request, two outputs. The resolution writes the annotated requirements (each package's parents,
for the `via` chains, and the index it came from). A second run, `--offline` on the cache the first
one just filled, writes PEP 751 pylock.toml (each package's files for the target, with URL, size and
sha256) in tens of milliseconds. It replaces fetching a project page per package after the
resolution, which cost more than uv itself on the real index (two runs at once both went to the
network, and a cold cache paid twice).

pip cannot resolve for another platform's markers and tags; uv can (`--python-platform`,
`--python-version`). Named indexes are pinned per package with a generated pyproject.toml
(`[[tool.uv.index]] explicit = true` + `[tool.uv.sources]`): a package the row assigns to the Ascend
or PyTorch CPU index is fetched from there and nothing else is, which no command-line flag can say.
uv never downloads an interpreter here and reads no user configuration (`--no-config`). It is handed
the interpreter to run sdists' build backends with when one of the target's Python is at hand: left
to find one, uv asks each candidate on PATH, and behind a version manager's shims that took 0.13 s
of every run (more than the whole offline run).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ascend_setup.errors import AscendSetupError
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.simple import IndexFile, make_file
from ascend_setup.index.tags import Target
from ascend_setup.utils.procs import capture

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.9/3.10 interpreters
    import tomli as tomllib

#: The manylinux levels uv's --python-platform knows, per architecture.
UV_GLIBC = ((2, 17), (2, 28), (2, 31), (2, 32), (2, 33), (2, 34), (2, 35), (2, 36), (2, 37), (2, 38), (2, 39), (2, 40))
ROOT_PROJECT = "ascend-setup-closure"
_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*(?:#\s*via\s+(.*))?$")
_FROM = re.compile(r"^#\s*from\s+(\S+)$")


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
    build_python: Optional[str] = None  # an interpreter of the target's Python for sdist metadata builds


@dataclass
class Resolved:
    name: str
    version: str
    parents: List[str]  # names of the packages that require it; ROOT_PROJECT for a root
    index_url: Optional[str] = None  # the index uv took it from
    files: List[IndexFile] = field(default_factory=list)  # its files for the target (pylock.toml)


def uv_platform(target: Target) -> str:
    """The largest manylinux level uv knows that the target's glibc can take."""
    fitting = [g for g in UV_GLIBC if g <= target.glibc_tuple] or [UV_GLIBC[0]]
    major, minor = max(fitting)
    return f"{target.arch}-manylinux_{major}_{minor}"


def _toml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def pyproject_text(request: ClosureRequest) -> str:
    """A throwaway project whose dependencies are the roots: the only way to pin packages to indexes."""
    lines = [
        "[project]",
        f'name = "{ROOT_PROJECT}"',
        'version = "0"',
        f"dependencies = {_toml_list(request.roots)}",
        "",
        "[tool.uv]",
        f"override-dependencies = {_toml_list(request.overrides)}",
        "",
    ]
    for name, url in request.named_indexes.items():
        lines += ["[[tool.uv.index]]", f"name = {json.dumps(name)}", f"url = {json.dumps(url)}", "explicit = true", ""]
    if request.sources:
        lines.append("[tool.uv.sources]")
        lines += [f"{json.dumps(pkg)} = {{ index = {json.dumps(index)} }}" for pkg, index in request.sources.items()]
    return "\n".join(lines) + "\n"


def parse_compiled(text: str) -> List[Resolved]:
    """`name==version  # via a, b` lines of uv's output (line annotations), each with its `# from URL`."""
    found: List[Resolved] = []
    for line in text.splitlines():
        source = _FROM.match(line.strip())
        if source and found:
            found[-1].index_url = source.group(1)
            continue
        match = _LINE.match(line.strip())
        if not match:
            continue
        parents = [p.strip().split(" ")[0] for p in (match.group(3) or "").split(",") if p.strip()]
        found.append(
            Resolved(
                canonicalize_name(match.group(1)),
                match.group(2),
                [ROOT_PROJECT if p in (ROOT_PROJECT, "-r") else canonicalize_name(p) for p in parents],
            )
        )
    return found


def parse_pylock(text: str) -> Dict[str, List[IndexFile]]:
    """name -> the files pylock.toml lists for the resolved version (its wheels for the target, its sdist)."""
    files: Dict[str, List[IndexFile]] = {}
    for package in tomllib.loads(text).get("packages", []):
        entries = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        found = []
        for entry in entries:
            url = entry.get("url")
            if not url:
                continue
            made = make_file(
                unquote(urlparse(url).path.rsplit("/", 1)[-1]),
                url,
                "",
                sha256=(entry.get("hashes") or {}).get("sha256"),
                size=entry.get("size"),
            )
            if made is not None:
                found.append(made)
        files[canonicalize_name(package["name"])] = found
    return files


def with_files(resolved: List[Resolved], pylock: Dict[str, List[IndexFile]]) -> List[Resolved]:
    """Each package's files, where the pylock run resolved the same version (two runs, one index: an index
    that moved between them leaves a package without files, and its page is read instead)."""
    for r in resolved:
        try:
            version = Version(r.version)
        except InvalidVersion:
            continue
        r.files = [replace(f, index=r.index_url or "") for f in pylock.get(r.name, []) if f.version == version]
    return resolved


def failure_block(stderr: str) -> List[str]:
    """The resolver's own explanation ('No solution found ...' and what follows), without its noise."""
    lines = [l.rstrip() for l in stderr.splitlines() if l.strip()]
    start = next((i for i, l in enumerate(lines) if "No solution found" in l), None)
    if start is not None:
        return lines[start : start + 25]
    errors = [l for l in lines if l.lstrip().startswith(("error:", "×", "Caused by", "cause:", "╰─▶"))]
    return (errors or lines)[-12:]


def compile_argv(request: ClosureRequest, workdir: Path, cache_dir: Optional[Path] = None) -> List[str]:
    """The `uv pip compile` command for `request`, its project and excludes files written into `workdir`
    (the output format flags are the caller's)."""
    project = workdir / "pyproject.toml"
    project.write_text(pyproject_text(request), encoding="utf-8")
    argv = [
        str(project),
        "--no-config",
        "--quiet",
        "--python-version",
        request.target.python,
        "--python-platform",
        uv_platform(request.target),
        "--default-index",
        request.default_index,
        "--index-strategy",
        "unsafe-best-match",
    ]
    if request.build_python:
        argv += ["--python", request.build_python]
    for url in request.extra_index_urls:
        argv += ["--index", url]
    if request.excludes:
        excludes = workdir / "excludes.txt"
        excludes.write_text("\n".join(request.excludes) + "\n", encoding="utf-8")
        argv += ["--excludes", str(excludes)]
    return ["pip", "compile", *argv, *(["--cache-dir", str(cache_dir)] if cache_dir else ["--no-cache"])]


def compile_closure(
    request: ClosureRequest,
    *,
    uv: Sequence[str],
    network: PipSettings,
    cache_dir: Optional[Path] = None,
    timeout: float = 600,
) -> List[Resolved]:
    """Resolve `request` with uv. Raises ResolutionFailed with uv's explanation when there is no solution."""
    with tempfile.TemporaryDirectory(prefix="ascend-setup-resolve-") as tmp:
        argv = [*uv, *compile_argv(request, Path(tmp), cache_dir)]
        proc = capture(
            [*argv, "--no-header", "--annotation-style", "line", "--emit-index-annotation"],
            env=network.uv_env(uv),
            timeout=timeout,
            cwd=Path(tmp),
        )
        if proc.returncode != 0:
            block = failure_block(proc.stderr)
            raise ResolutionFailed(
                f"uv found no installable set of versions for {request.target.describe()}: "
                f"{block[0] if block else 'exit ' + str(proc.returncode)}",
                hint="the lines above are uv's explanation",
                details="\n".join(block),
            )
        files: Dict[str, List[IndexFile]] = {}
        if cache_dir:
            pylock = capture(
                [*argv, "--offline", "--format", "pylock.toml"], env=network.uv_env(uv), timeout=timeout, cwd=Path(tmp)
            )
            try:
                files = parse_pylock(pylock.stdout) if pylock.returncode == 0 else {}
            except ValueError:  # not whole: each package's page is read instead, as without a cache
                files = {}
    return with_files(parse_compiled(proc.stdout), files)
