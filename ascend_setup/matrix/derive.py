"""A matrix row read from the packages' own metadata: vllm-ascend's Requires-Dist is the truth (the docs
table lagged behind at the 0.23.0 tag), torch-npu's per-architecture wheels say which torch build each
architecture needs, and the wheels' tags say which glibc they need.

What metadata cannot say (the CANN version, the CUDA-only list, the CANN compiler's Python deps, the
serving hints, the disk budget) comes from --cann and from the matrix's newest row, and is said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from email.parser import HeaderParser
from typing import Any, Dict, List, Optional, Tuple

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascend_setup.dists.markers import requirements
from ascend_setup.errors import AscendSetupError
from ascend_setup.index.http import IndexUnreachable
from ascend_setup.index.metadata import MetadataReader, wheel_member
from ascend_setup.index.simple import IndexFile, IndexSet
from ascend_setup.index.tags import manylinux_glibc, platform_arch
from ascend_setup.matrix.models import MIRROR, Matrix, Row
from ascend_setup.matrix.soc import BUILD_INFO, build_info_device

ARCHES = ("aarch64", "x86_64")
#: Row fields that no package metadata holds: carried over from the matrix's newest row.
CARRIED = ("cuda_only", "cann_python_deps", "runtime_hints", "disk_gib", "build_minutes")
#: The row's pins that are binary wheels per CPython: a plugin without wheels takes its Python bound from them.
BINARY_PINS = ("torch-npu", "triton-ascend")


@dataclass
class DerivedRow:
    cann: str
    row: Dict[str, Any]
    provenance: Dict[str, str] = field(default_factory=dict)  # field -> the file (or row) it came from
    problems: List[str] = field(default_factory=list)  # what could not be read (an unreachable index, say)
    notes: List[str] = field(default_factory=list)  # what was decided that the metadata leaves open (a conflict)


def _files(indexes: IndexSet, name: str, version: str) -> List[IndexFile]:
    return [f for page in indexes.pages(name) for f in page.files if str(f.version) == version]


def _metadata(reader: MetadataReader, files: List[IndexFile]) -> Tuple[Dict[str, Any], IndexFile]:
    """(Requires-Dist, Requires-Python) of a wheel of the version (an sdist's PKG-INFO when none)."""
    chosen = next((f for f in files if f.kind == "wheel"), files[0])
    message = HeaderParser().parsestr(reader.metadata(chosen))
    return {"requires": message.get_all("Requires-Dist") or [], "python": message.get("Requires-Python")}, chosen


def _unconditional(requires: List[str]) -> List[Requirement]:
    return [r for r in requirements(requires) if r.marker is None or "extra" not in str(r.marker)]


def _exact(req: Requirement) -> Optional[str]:
    specs = list(req.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version else None


def _newest_cpython(files: List[IndexFile]) -> Optional[int]:
    """The newest CPython minor the files' wheels are built for (cp312 -> 12); None without such wheels."""
    minors = [
        int(t.interpreter[3:])
        for f in files
        if f.kind == "wheel"
        for t in f.tags
        if t.interpreter.startswith("cp3") and t.interpreter[3:].isdigit() and t.abi != "abi3"
    ]
    return max(minors) if minors else None


def python_range(
    requires_python: str, files: List[IndexFile], bounds: Optional[Dict[str, Tuple[int, str]]] = None
) -> Tuple[str, str]:
    """(range, why): Requires-Python, closed above by the newest CPython the plugin's wheels are built for
    (cp312 -> <3.13). A plugin with no wheels (an sdist-only post release) is closed by the row's binary pins
    instead (`bounds`: name -> (first CPython minor it has no wheel for, where that was read)): the venv cannot
    take a Python that torch-npu or triton-ascend publishes no wheel for, so the tightest of them bounds it."""
    if "<" in requires_python:
        return requires_python, "Requires-Python (already closed above)"
    newest = _newest_cpython(files)
    if newest is not None:
        return f"{requires_python},<3.{newest + 1}", "Requires-Python, closed by the newest cpXY wheel published"
    if not bounds:
        return requires_python, "Requires-Python (no wheel of the plugin or its binary pins closes it)"
    tightest = min(minor for minor, _ in bounds.values())
    said = "; ".join(f"{name}: {why}" for name, (_, why) in sorted(bounds.items()))
    return (
        f"{requires_python},<3.{tightest}",
        f"Requires-Python; the plugin has no wheels, so closed by its binary pins ({said})",
    )


def _binary_bounds(matrix: Matrix, packages: Dict[str, str], indexes: List[IndexSet]) -> Dict[str, Tuple[int, str]]:
    """name -> (first CPython minor without a wheel, why) for the binary pins; one whose files no index could
    show takes the bound of the matrix row that pins the same version (not verified, and said so)."""
    bounds: Dict[str, Tuple[int, str]] = {}
    for name in BINARY_PINS:
        version = packages.get(name)
        if version is None:
            continue
        newest = _newest_cpython([f for index in indexes for f in _files(index, name, version)])
        if newest is not None:
            bounds[name] = (newest + 1, f"{name} {version}'s newest wheel is cp3{newest}")
            continue
        for row in (r for r in matrix.rows.values() if r.packages.get(name) == version):
            upper = [Version(s.version).minor for s in SpecifierSet(row.python) if s.operator == "<"]
            if upper:
                bounds[name] = (
                    min(upper),
                    f"{name} {version}'s wheels could not be listed; row {row.cann}, which "
                    f"pins it, says {row.python} (not verified)",
                )
                break
    return bounds


def derive_row(
    matrix: Matrix,
    vllm_ascend: str,
    cann: str,
    mirror: List[str],
    reader: Optional[MetadataReader] = None,
    pool: Optional[Dict[str, Any]] = None,
) -> DerivedRow:
    """The row for `vllm_ascend` (whose pins it reads from the indexes) paired with CANN `cann`. `pool` shares
    fetched index pages between derivations (matrix check derives one row per release)."""
    reader = reader or MetadataReader()
    pool = {} if pool is None else pool
    main = IndexSet(mirror, pool=pool)
    named = {name: IndexSet([url], pool=pool) for name, url in matrix.indexes.items()}
    plugin_files = _files(main, "vllm-ascend", vllm_ascend)
    if not plugin_files:
        errors = [p.error for p in main.pages("vllm-ascend") if p.error]
        if errors:
            raise IndexUnreachable(f"vllm-ascend {vllm_ascend} could not be looked up: {errors[0]}")
        raise AscendSetupError(
            f"vllm-ascend {vllm_ascend} is on none of {', '.join(main.urls)}",
            hint="check the version, or --index-url for an index that has it",
        )
    plugin, plugin_file = _metadata(reader, plugin_files)
    vllm_version = Version(vllm_ascend).base_version  # vllm-ascend X(rcN) goes with vllm X, by its policy
    vllm_files = _files(main, "vllm", vllm_version)
    vllm_specs: Dict[str, SpecifierSet] = {}
    for vreq in _unconditional(_metadata(reader, vllm_files)[0]["requires"]) if vllm_files else []:
        vname = canonicalize_name(vreq.name)
        vllm_specs[vname] = vllm_specs.get(vname, SpecifierSet()) & vreq.specifier
    provenance = {"packages.vllm": f"vllm-ascend {vllm_ascend}'s version (vllm-ascend X goes with vllm X)"}
    packages: Dict[str, str] = {"vllm": vllm_version, "vllm-ascend": vllm_ascend}
    plugin_requirements: List[str] = []
    notes: List[str] = []
    for req in _unconditional(plugin["requires"]):
        name, pin = canonicalize_name(req.name), _exact(req)
        if pin:
            packages[name] = pin
            provenance[f"packages.{name}"] = f"{plugin_file.filename} Requires-Dist"
        elif str(req.specifier) and name in vllm_specs:
            published = [f.version for page in main.pages(name) for f in page.files]
            theirs = vllm_specs[name]
            fitting = [v for v in published if theirs.contains(v)]
            if fitting and not any(req.specifier.contains(v) for v in fitting):
                # The resolver would find nothing. The row pins the newest version vllm takes: a row's pin wins
                # over both requirements, and vllm, which needs it, is the newer of the two declarations.
                packages[name] = str(max(fitting))
                provenance[f"packages.{name}"] = (
                    f"the newest {name} vllm {vllm_version} takes ({theirs}); "
                    f"{plugin_file.filename}'s {name}{req.specifier} excludes them all"
                )
                notes.append(
                    f"{name}{req.specifier} ({plugin_file.filename}) and {name}{theirs} (vllm {vllm_version}) "
                    f"leave no published version in common: the row pins {name} {max(fitting)}, vllm's newest"
                )
            else:
                plugin_requirements.append(f"{name}{req.specifier}")
    provenance["plugin_requirements"] = f"{plugin_file.filename} Requires-Dist (bounds on vllm's own requirements)"
    problems: List[str] = []
    package_index: Dict[str, str] = {}
    for dist, version in packages.items():
        if _files(main, dist, version):
            continue
        host = next((n for n, index in named.items() if _files(index, dist, version)), None)
        if host:
            package_index[dist] = host
            provenance[f"package_index.{dist}"] = f"{dist} {version} is on the {host} index, not on the mirror"
        else:
            errors = [p.error for i in [main, *named.values()] for p in i.pages(dist) if p.error]
            problems.append(
                f"{dist} {version}: "
                + (f"an index could not be reached ({errors[0]})" if errors else "no index serves it")
            )
            kept = matrix.newest().index_of(dist)
            if errors and kept != MIRROR:  # the file could not be looked for: keep where the matrix takes it from
                package_index[dist] = kept
                provenance[f"package_index.{dist}"] = (
                    f"row {matrix.newest().cann} (not verified: an index could not be reached)"
                )
    arch: Dict[str, Dict[str, Dict[str, str]]] = {}
    npu_files = _files(main, "torch-npu", packages.get("torch-npu", ""))
    for arch_name in ARCHES:
        wheels = [
            f for f in npu_files if f.kind == "wheel" and any(platform_arch(t.platform) == arch_name for t in f.tags)
        ]
        if not wheels:
            continue
        torch_req = next(
            (r for r in _unconditional(reader.requires(wheels[0])) if canonicalize_name(r.name) == "torch"), None
        )
        pin = _exact(torch_req) if torch_req else None
        local = Version(pin).local if pin else None
        if pin and local:
            cpu = next((n for n, index in named.items() if _files(index, "torch", pin)), "pytorch-cpu")
            arch[arch_name] = {
                "packages": {
                    "torch": pin,
                    **{n: f"{packages[n]}+{local}" for n in ("torchvision", "torchaudio") if n in packages},
                },
                "package_index": {n: cpu for n in ("torch", "torchvision", "torchaudio") if n in packages},
            }
            provenance[f"arch.{arch_name}"] = f"{wheels[0].filename} Requires-Dist: {torch_req}"
    wheel_glibc: Dict[str, Dict[str, str]] = {}
    for arch_name in ARCHES:
        levels = [
            manylinux_glibc(t.platform)
            for f in plugin_files
            if f.kind == "wheel"
            for t in f.tags
            if platform_arch(t.platform) == arch_name and manylinux_glibc(t.platform)
        ]
        if levels:
            wheel_glibc.setdefault("vllm-ascend", {})[arch_name] = ".".join(map(str, min(levels)))
    provenance["wheel_glibc"] = "the vllm-ascend wheels' platform tags"
    wheel_device, device_problems = wheel_devices(plugin_files)
    problems += device_problems
    provenance["wheel_device"] = f"{BUILD_INFO} in one vllm-ascend wheel per architecture (range reads)"
    newest = matrix.newest()
    bounds = _binary_bounds(matrix, packages, [main, *named.values()])
    python, why = python_range(plugin["python"] or newest.python, plugin_files, bounds)
    provenance["python"] = f"{plugin_file.filename} {why}"
    row: Dict[str, Any] = {"python": python, "packages": packages}
    if package_index:
        row["package_index"] = package_index
    if arch:
        row["arch"] = arch
    row["plugin_requirements"] = plugin_requirements
    carried = newest.to_json()
    for key in CARRIED:
        row[key] = carried[key]
        provenance[key] = f"row {newest.cann} (no package metadata holds it)"
    row["wheel_glibc"] = wheel_glibc
    if wheel_device:
        row["wheel_device"] = wheel_device
    provenance["cann"] = "--cann (no package metadata holds it)"
    return DerivedRow(cann=cann, row=row, provenance=provenance, problems=problems, notes=notes)


def wheel_devices(plugin_files: List[IndexFile]) -> Tuple[Dict[str, Dict[str, str]], List[str]]:
    """{'vllm-ascend': {arch: device type}} from the `_build_info.py` of one published wheel per
    architecture, read by range requests (the zip's directory, then that member: a few hundred KB of a
    wheel of tens of MB); and what could not be read."""
    found: Dict[str, str] = {}
    problems: List[str] = []
    for arch_name in ARCHES:
        wheel = next(
            (
                f
                for f in plugin_files
                if f.kind == "wheel" and any(platform_arch(t.platform) == arch_name for t in f.tags)
            ),
            None,
        )
        if wheel is None:
            continue
        try:
            read = wheel_member(wheel, BUILD_INFO)
        except IndexUnreachable as exc:
            problems.append(f"vllm-ascend {wheel.filename}: its {BUILD_INFO} could not be read ({exc.message})")
            continue
        if read.text is not None:
            found[arch_name] = build_info_device(read.text)
    return ({"vllm-ascend": found} if found else {}), problems


def unverified(derived: DerivedRow) -> List[str]:
    """Packages whose files no index could be asked about: where they come from (and, for torch-npu, its
    wheels' own Requires-Dist) is not known. Their pins are: those come from the plugin's metadata."""
    return [p.split(" ", 1)[0] for p in derived.problems]


def compare_rows(row: Row, derived: DerivedRow) -> List[str]:
    """What differs between a matrix row and the row the metadata gives: one line each. Every pin is compared
    (the plugin's metadata names it, whichever index holds the file); only what needed an unreachable index
    is left out: where an unverified package comes from, and torch-npu's per-architecture pins."""
    found = []
    skip = set(unverified(derived))
    for arch_name in ARCHES:
        mine = row.for_arch(arch_name) if "torch-npu" not in skip else row
        theirs = Row.model_validate({**derived.row, "cann": row.cann})
        theirs = theirs.for_arch(arch_name) if "torch-npu" not in skip else theirs
        for name in sorted(set(mine.packages) | set(theirs.packages)):
            a, b = mine.packages.get(name), theirs.packages.get(name)
            if a != b:
                found.append(
                    f"{arch_name}: {name} is {a or 'not pinned'} in the matrix, {b or 'not pinned'} in the metadata"
                )
            elif a and name not in skip and mine.index_of(name) != theirs.index_of(name):
                found.append(
                    f"{arch_name}: {name} comes from {mine.index_of(name)} in the matrix, "
                    f"{theirs.index_of(name)} by the indexes"
                )
    for name, per_arch in derived.row["wheel_glibc"].items():
        for arch_name, glibc in per_arch.items():
            have = row.wheel_glibc.get(name, {}).get(arch_name)
            if have != glibc:
                found.append(f"wheel_glibc {name} {arch_name}: {have} in the matrix, {glibc} in the published tags")
    for name, per_arch in derived.row.get("wheel_device", {}).items():
        for arch_name, device in per_arch.items():
            if row.wheel_device_of(name, arch_name) != device:
                found.append(
                    f"wheel_device {name} {arch_name}: {row.wheel_device_of(name, arch_name)} in the matrix, "
                    f"{device} in the published wheel's {BUILD_INFO}"
                )
    return list(dict.fromkeys(found))


def consistency(row: Row) -> List[str]:
    """A row's problems that need no index: plugin bounds against the row's pins, torch builds that do not
    match across the family, an empty Python range."""
    found = []
    for text in row.plugin_requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name in row.packages and not req.specifier.contains(row.packages[name], prereleases=True):
            found.append(f"plugin_requirements {text} excludes the row's own pin {name}=={row.packages[name]}")
    for arch_name in ARCHES:
        view = row.for_arch(arch_name)
        locals_ = {
            n: Version(view.packages[n]).local for n in ("torch", "torchvision", "torchaudio") if n in view.packages
        }
        if len(set(locals_.values())) > 1:
            builds = ", ".join(f"{n} {view.packages[n]}" for n in locals_)
            found.append(f"{arch_name}: the torch family mixes builds ({builds})")
        named = {view.index_of(n) for n in locals_}
        if len(named) > 1:
            found.append(f"{arch_name}: the torch family comes from different indexes ({', '.join(sorted(named))})")
    if not any(row.python_allows(f"3.{m}.0") for m in range(8, 16)):
        found.append(f"python {row.python} allows no CPython 3.8-3.15")
    return found


def row_yaml(derived: DerivedRow) -> str:
    """The row as YAML under `rows:` (indented two spaces), its provenance as comments above it."""
    import yaml

    lines = [f"  # derived by 'ascend-setup matrix derive' for CANN {derived.cann}; where each field came from:"]
    lines += [f"  #   {key}: {source}" for key, source in sorted(derived.provenance.items())]
    body = yaml.safe_dump({derived.cann: derived.row}, sort_keys=False, default_flow_style=False, width=120)
    lines += ["  " + line if line else line for line in body.splitlines()]
    return "\n".join(lines) + "\n"


def into_matrix(text: str, derived: DerivedRow) -> str:
    """`text` with the derived row added, or put in place of the row of that CANN version. Everything else
    (comments, anchors, other rows) stays as it was."""
    lines = text.splitlines(keepends=True)
    block = row_yaml(derived).splitlines(keepends=True)
    keys = (f'  "{derived.cann}":', f"  '{derived.cann}':", f"  {derived.cann}:")
    start = next((i for i, l in enumerate(lines) if l.rstrip().startswith(keys)), None)
    if start is None:
        if not any(l.startswith("rows:") for l in lines):
            raise AscendSetupError("the matrix file has no 'rows:' section to add the row to")
        return "".join(lines) + ("" if not lines or lines[-1].endswith("\n") else "\n") + "".join(block)
    end = start + 1
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    while start > 0 and lines[start - 1].startswith("  # "):  # an earlier derivation's provenance comments
        start -= 1
    return "".join(lines[:start] + block + lines[end:])
