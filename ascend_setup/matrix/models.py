"""Pydantic models of the compatibility matrix. A row is frozen: callers take a whole row or nothing."""

from __future__ import annotations

import fnmatch
import re
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from typing_extensions import Annotated

from ascend_setup.index.tags import ARCHES
from ascend_setup.index.urls import is_index_url

#: Every row must pin these, or the stack is not a stack.
REQUIRED_PACKAGES = (
    "vllm",
    "vllm-ascend",
    "torch",
    "torch-npu",
    "torchvision",
    "torchaudio",
    "triton-ascend",
    "transformers",
)

#: The index name that means "the PyPI mirror chosen at install time".
MIRROR = "mirror"


def exact_version(value: object) -> str:
    try:
        Version(str(value))
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a valid version") from None
    return str(value)


def _specifier(value: str, example: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(f"{value!r} is not a version range such as {example!r}") from None
    return value


#: A version string checked one by one, so an error's location names the package (and its line).
ExactVersion = Annotated[str, BeforeValidator(exact_version)]


def index_url_value(value: object) -> str:
    """An index is reached over http(s) or read from a file:// tree; pip and uv take nothing else."""
    text = str(value)
    if not is_index_url(text):
        raise ValueError(f"{text!r} is not an http(s):// or file:// URL")
    return text


#: A URL of an index or a file on one, checked where it is loaded (matrix, lock, state).
IndexUrl = Annotated[str, BeforeValidator(index_url_value)]


class RuntimeHint(BaseModel):
    """A serving-side flag the user needs after install (FIELD_NOTES 'After install')."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    text: str
    serve_args: Tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    #: The vllm-ascend versions the hint applies to (a specifier such as ">=0.23.0"); empty: every version.
    plugin: str = ""
    #: Needed only where vLLM's HAS_TRITON is false: serve drops it on a venv whose Triton works.
    only_without_triton: bool = False

    @field_validator("plugin")
    @classmethod
    def _plugin_is_specifier(cls, value: str) -> str:
        return _specifier(value, ">=0.23.0")

    def applies_to(self, plugin_version: str) -> bool:
        """Whether this hint holds for that vllm-ascend release (pre-releases included)."""
        return SpecifierSet(self.plugin).contains(plugin_version, prereleases=True)


class ArchVariant(BaseModel):
    """What differs on one architecture: a pin (torch's `+cpu` build on x86_64) and where it comes from.

    On x86_64 torch-npu's wheels require `torch==2.10.0+cpu`, which only the PyTorch CPU index serves;
    on aarch64 they require plain `torch==2.10.0` from the PyPI mirror."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    packages: Mapping[str, ExactVersion] = Field(default_factory=dict)
    package_index: Mapping[str, str] = Field(default_factory=dict)

    @field_validator("packages", "package_index")
    @classmethod
    def _canonical(cls, value: Mapping[str, str]) -> Mapping[str, str]:
        return MappingProxyType({canonicalize_name(n): v for n, v in value.items()})


class Row(BaseModel):
    """One CANN release and the exact stack that goes with it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cann: str
    python: str
    packages: Mapping[str, ExactVersion]
    package_index: Mapping[str, str] = Field(default_factory=dict)
    plugin_requirements: Tuple[str, ...] = ()
    cuda_only: Tuple[str, ...]
    cann_python_deps: Mapping[str, Optional[ExactVersion]]
    runtime_hints: Tuple[RuntimeHint, ...] = ()
    disk_gib: float = Field(gt=0)  # GiB; a fraction for small stacks (the demo's simulated one)
    wheel_glibc: Mapping[str, Mapping[str, str]] = Field(default_factory=dict)
    #: package -> arch -> the device type (A2, A3, _310P, A5) its published wheels were built for, as their
    #: vllm_ascend/_build_info.py says (`matrix derive` reads it); such a wheel runs on that device type only.
    wheel_device: Mapping[str, Mapping[str, str]] = Field(default_factory=dict)
    #: package -> the CPython minors its pinned version is known to publish wheels for: the Python choice's
    #: fallback when the index that holds it cannot be asked.
    wheel_pythons: Mapping[str, Tuple[str, ...]] = Field(default_factory=dict)
    build_minutes: int = Field(default=40, gt=0)
    arch: Mapping[str, ArchVariant] = Field(default_factory=dict)
    #: The architecture this row was specialised for by `for_arch` (None: the generic row).
    target_arch: Optional[str] = None

    @field_validator("cann")
    @classmethod
    def _cann_is_version(cls, value: str) -> str:
        return exact_version(value)

    @field_validator("python")
    @classmethod
    def _python_is_specifier(cls, value: str) -> str:
        return _specifier(value, ">=3.10,<3.13")

    @field_validator("packages")
    @classmethod
    def _packages_pinned(cls, value: Mapping[str, str]) -> Mapping[str, str]:
        pins: Dict[str, str] = {canonicalize_name(name): ver for name, ver in value.items()}
        missing = [name for name in REQUIRED_PACKAGES if name not in pins]
        if missing:
            raise ValueError(f"missing pins for {', '.join(missing)}")
        return MappingProxyType(pins)

    @field_validator("cann_python_deps")
    @classmethod
    def _minimums(cls, value: Mapping[str, Optional[str]]) -> Mapping[str, Optional[str]]:
        return MappingProxyType({canonicalize_name(n): v for n, v in value.items()})

    @field_validator("wheel_glibc")
    @classmethod
    def _glibc_versions(cls, value: Mapping[str, Mapping[str, str]]) -> Mapping[str, Mapping[str, str]]:
        frozen: Dict[str, Mapping[str, str]] = {}
        for name, per_arch in value.items():
            for arch, glibc in per_arch.items():
                if not re.fullmatch(r"\d+\.\d+", str(glibc)):
                    raise ValueError(f"{name}: {arch}: {glibc!r} is not a glibc version such as '2.34'")
            frozen[canonicalize_name(name)] = MappingProxyType({a: str(g) for a, g in per_arch.items()})
        return MappingProxyType(frozen)

    @field_validator("wheel_device")
    @classmethod
    def _freeze_devices(cls, value: Mapping[str, Mapping[str, str]]) -> Mapping[str, Mapping[str, str]]:
        return MappingProxyType(
            {
                canonicalize_name(n): MappingProxyType({a: str(d) for a, d in per_arch.items()})
                for n, per_arch in value.items()
            }
        )

    @field_validator("package_index")
    @classmethod
    def _freeze_index(cls, value: Mapping[str, str]) -> Mapping[str, str]:
        return MappingProxyType({canonicalize_name(n): v for n, v in value.items()})

    @field_validator("plugin_requirements")
    @classmethod
    def _requirements_parse(cls, value: Tuple[str, ...]) -> Tuple[str, ...]:
        from packaging.requirements import InvalidRequirement, Requirement

        for text in value:
            try:
                Requirement(text)
            except InvalidRequirement as exc:
                raise ValueError(f"{text!r} is not a requirement: {exc}") from None
        return value

    @field_validator("arch")
    @classmethod
    def _known_arches(cls, value: Mapping[str, ArchVariant]) -> Mapping[str, ArchVariant]:
        unknown = [a for a in value if a not in ARCHES]
        if unknown:
            raise ValueError(f"unknown architecture {unknown[0]!r} (known: {', '.join(ARCHES)})")
        return MappingProxyType(dict(value))

    @model_validator(mode="after")
    def _index_names_pinned(self) -> Row:
        unknown = [n for n in self.package_index if n not in self.packages]
        for arch, variant in self.arch.items():
            unknown += [f"{n} ({arch})" for n in variant.packages if n not in self.packages]
            unknown += [f"{n} ({arch})" for n in variant.package_index if n not in self.packages]
        if unknown:
            raise ValueError(f"package_index names packages the row does not pin: {', '.join(unknown)}")
        return self

    def for_arch(self, arch: str) -> Row:
        """The row as a host of `arch` takes it: that architecture's pins and indexes merged in.
        Every caller that installs or forecasts for a machine asks for this view, never the generic row."""
        variant = self.arch.get(arch)
        if variant is None:
            return self.model_copy(update={"target_arch": arch})
        return self.model_copy(
            update={
                "packages": MappingProxyType({**self.packages, **variant.packages}),
                "package_index": MappingProxyType({**self.package_index, **variant.package_index}),
                "target_arch": arch,
            }
        )

    def named_indexes(self) -> List[str]:
        """The named indexes (not the mirror) this row takes packages from, in first-use order."""
        return [n for n in dict.fromkeys(self.index_of(p) for p in self.packages) if n != MIRROR]

    def packages_from(self, index_name: str) -> Dict[str, str]:
        """name -> pinned version of the packages the row assigns to `index_name`."""
        return {n: v for n, v in self.packages.items() if self.index_of(n) == index_name}

    # -- questions callers ask of a row ------------------------------------------------------
    def pin(self, name: str) -> Version:
        """The row's exact version of `name` (KeyError if the row does not pin it)."""
        return Version(self.packages[canonicalize_name(name)])

    def index_of(self, name: str) -> str:
        """Which named index `name` comes from: MIRROR unless the row says otherwise."""
        return self.package_index.get(canonicalize_name(name), MIRROR)

    def wheel_device_of(self, name: str, arch: str) -> Optional[str]:
        """The device type `name`'s published wheels for `arch` were built for (None: not recorded)."""
        return self.wheel_device.get(canonicalize_name(name), {}).get(arch)

    def is_cuda_only(self, name: str) -> bool:
        """Whether a requirement of vllm is one the row strips (patterns match normalized names)."""
        canon = canonicalize_name(name)
        return any(fnmatch.fnmatchcase(canon, canonicalize_name(p)) for p in self.cuda_only)

    def hints(self) -> Tuple[RuntimeHint, ...]:
        """The serving hints that hold for this row's own vllm-ascend (a hint can name the releases it fits)."""
        return tuple(h for h in self.runtime_hints if h.applies_to(self.packages["vllm-ascend"]))

    def python_allows(self, version: str) -> bool:
        return SpecifierSet(self.python).contains(version, prereleases=True)

    def to_json(self) -> Dict[str, Any]:
        """The row as one JSON object (matrix show --json)."""
        return {
            "cann": self.cann,
            "python": self.python,
            "packages": dict(self.packages),
            "package_index": {n: self.index_of(n) for n in self.packages},
            "plugin_requirements": list(self.plugin_requirements),
            "cuda_only": list(self.cuda_only),
            "cann_python_deps": dict(self.cann_python_deps),
            "runtime_hints": [h.model_dump(mode="json") for h in self.runtime_hints],
            "disk_gib": self.disk_gib,
            "wheel_glibc": {n: dict(v) for n, v in self.wheel_glibc.items()},
            **({"wheel_device": {n: dict(v) for n, v in self.wheel_device.items()}} if self.wheel_device else {}),
            "build_minutes": self.build_minutes,
            "arch": {
                a: {"packages": dict(v.packages), "package_index": dict(v.package_index)} for a, v in self.arch.items()
            },
            **({"target_arch": self.target_arch} if self.target_arch else {}),
        }


class Matrix(BaseModel):
    """The whole matrix file. Rows are reached only through `row()`, whole."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: int = Field(alias="schema")
    indexes: Mapping[str, IndexUrl]
    well_known_mirrors: Tuple[IndexUrl, ...] = ()
    #: vllm-ascend release -> the CANN it is for, where no row pins it and its own README says otherwise.
    plugin_cann: Mapping[str, ExactVersion] = Field(default_factory=dict)
    rows: Dict[str, Row]
    source: str = "<memory>"

    @model_validator(mode="before")
    @classmethod
    def _key_rows(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("rows"), dict):
            data = dict(data)
            data["rows"] = {
                str(key): ({**body, "cann": str(key)} if isinstance(body, dict) else body)
                for key, body in data["rows"].items()
            }
        return data

    @model_validator(mode="after")
    def _indexes_known(self) -> Matrix:
        if not self.rows:
            raise ValueError("the matrix has no rows")
        if MIRROR in self.indexes:
            raise ValueError(f"index name {MIRROR!r} is reserved for the PyPI mirror chosen at install time")
        for row in self.rows.values():
            assigned = list(row.package_index.items())
            for variant in row.arch.values():
                assigned += list(variant.package_index.items())
            for name, index in assigned:
                if index != MIRROR and index not in self.indexes:
                    raise ValueError(f"row {row.cann}: {name} comes from unknown index {index!r}")
        return self

    def with_indexes(self, overrides: Mapping[str, str]) -> Matrix:
        """The matrix with named indexes replaced (`--index NAME=URL`); an unknown name is bad input."""
        if not overrides:
            return self
        unknown = [n for n in overrides if n not in self.indexes]
        if unknown:
            from ascend_setup.errors import BadInput

            raise BadInput(
                f"--index {unknown[0]}=...: the matrix has no index named {unknown[0]!r}",
                hint=f"named indexes: {', '.join(self.indexes) or 'none'}",
            )
        return self.model_copy(update={"indexes": MappingProxyType({**self.indexes, **overrides})})

    def versions(self) -> List[str]:
        """Known CANN versions, newest first."""
        return sorted(self.rows, key=Version, reverse=True)

    def newest(self) -> Row:
        return self.rows[self.versions()[0]]

    def index_url(self, name: str) -> str:
        return self.indexes[name]
