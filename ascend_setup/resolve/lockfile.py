"""The lock: one resolved closure for one target, and the slices each install step takes from it.

Format: a pip requirements file with one `--hash` per package (the very file the forecast names, so
pip's hash check proves the install took it), grouped by the index each package comes from. PEP 751
`pylock.toml` was the first choice, but pip cannot install from one yet and a pylock cannot say which
named index a package must come from; a requirements file both installers read can. The target, the
row, the indexes and everything the forecast shows (outcome, size, via chains, build backends,
warnings) travel in one `# ascend-setup-lock:` JSON comment line, which is what `read_lock` trusts.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any, Dict, Final, Iterable, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from typing_extensions import Annotated

from ascend_setup.errors import BadInput
from ascend_setup.index.tags import Target
from ascend_setup.matrix.models import ExactVersion, IndexUrl
from ascend_setup.utils.files import atomic_write_text, make_dir
from ascend_setup.utils.inputs import FileName, parse_json, read_input_text

LOCK_FORMAT: Final = "ascend-setup-lock"
DATA_PREFIX = "# ascend-setup-lock: "
#: What the lock does for a package. The same Literal as index.choose.Outcome, written again rather than
#: imported: index.choose pulls in the HTTP stack, which audit (a lock reader) must start without. mypy checks
#: that the two agree where a Choice becomes a LockedPackage.
Outcome = Literal["wheel", "sdist", "unavailable"]
#: What pip's --hash takes: a lock with anything else would fail only at install time, or never check.
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
#: A target Python as X.Y (the lock is for one minor version).
MinorVersion = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,2}\.[0-9]{1,3}$")]


class LockWarning(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    package: Optional[str] = None
    message: str


class LockedPackage(BaseModel):
    """One package of the closure and the one file that will be installed for it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: Optional[ExactVersion] = None
    outcome: Outcome
    index: str  # "mirror" or a named index of the row
    index_url: Optional[IndexUrl] = None
    file: Optional[FileName] = None  # joined to downloads/ and a bundle's files/: one name, never a path
    url: Optional[IndexUrl] = None
    sha256: Optional[Sha256] = None
    size: Optional[int] = Field(default=None, ge=0)
    via: List[str] = Field(default_factory=list)  # requirement chains that bring it in
    requires: List[str] = Field(default_factory=list)  # its dependencies inside the lock
    no_deps: bool = False  # installed alone (vllm, vllm-ascend): its requirements were derived instead
    reason: Optional[str] = None
    backend: Optional[str] = None  # an sdist's build backend

    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


class LockTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arch: str
    glibc: ExactVersion
    python: MinorVersion
    device: Optional[str] = None  # the NPU device type (A2, A3, _310P, A5) it was resolved for; None: unknown

    @classmethod
    def of(cls, target: Target, device: Optional[str] = None) -> LockTarget:
        return cls(arch=target.arch, glibc=target.glibc, python=target.python, device=device)


class Lock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["ascend-setup-lock"] = LOCK_FORMAT
    version: Literal[1] = 1
    cann: ExactVersion
    target: LockTarget
    indexes: Dict[str, IndexUrl]  # "mirror" and every named index -> URL
    extra_index_urls: List[IndexUrl] = Field(default_factory=list)
    inputs: str  # digest of what the resolution depended on: row, indexes, target
    packages: List[LockedPackage]
    warnings: List[LockWarning] = Field(default_factory=list)

    # -- questions --------------------------------------------------------------------------------
    def by_name(self) -> Dict[str, LockedPackage]:
        return {p.name: p for p in self.packages}

    def get(self, name: str) -> Optional[LockedPackage]:
        return self.by_name().get(name)

    @property
    def unavailable(self) -> List[LockedPackage]:
        return [p for p in self.packages if p.outcome == "unavailable"]

    @property
    def download_bytes(self) -> int:
        return sum(p.size or 0 for p in self.packages if p.outcome != "unavailable")

    def summary(self) -> Dict[str, int]:
        counts = {"packages": len(self.packages), "wheels": 0, "sdists": 0, "unavailable": 0}
        for p in self.packages:
            counts[{"wheel": "wheels", "sdist": "sdists"}.get(p.outcome, "unavailable")] += 1
        return counts

    def closure_of(self, roots: Iterable[str], skip: Iterable[str] = ()) -> List[LockedPackage]:
        """`roots` and everything they require inside the lock, minus `skip` (taken by an earlier step)."""
        table = self.by_name()
        skipped = set(skip)
        seen: List[str] = []
        queue = deque(r for r in roots if r in table)
        while queue:
            name = queue.popleft()
            if name in seen or name in skipped:
                continue
            seen.append(name)
            queue.extend(d for d in table[name].requires if d in table)
        return [table[n] for n in seen]

    def to_json(self) -> Dict[str, Any]:
        return self.model_dump(mode="json")


def lock_file_name(cann: str, target: Target, inputs: str = "") -> str:
    """The workdir's lock for a row and target: what the resolve step writes. With `inputs` (a digest of
    what the lock depends on, indexes included), the name a fleet keeps one lock under."""
    return f"{cann}-{target.key()}{'-' + inputs if inputs else ''}.txt"


def render_requirements(packages: Iterable[LockedPackage]) -> str:
    """`name==version --hash=sha256:...` lines for pip/uv's --require-hashes (no resolution)."""
    lines = []
    for p in packages:
        if p.outcome == "unavailable" or not p.version:
            continue
        lines.append(p.requirement() + (f" \\\n    --hash=sha256:{p.sha256}" if p.sha256 else ""))
    return "\n".join(lines) + ("\n" if lines else "")


def lock_text(lock: Lock) -> str:
    t = lock.target
    head = [
        f"# ascend-setup lock: CANN {lock.cann} for {t.arch} / glibc {t.glibc} / Python {t.python}",
        f"# Install it on a matching host: ascend-setup install --cann {lock.cann} --lock THIS_FILE",
        "# Each section comes from the index it names; every package is installed with --no-deps.",
        DATA_PREFIX + json.dumps(lock.to_json(), separators=(",", ":"), sort_keys=True),
    ]
    body: List[str] = []
    groups: Dict[str, List[LockedPackage]] = {}
    for p in lock.packages:
        groups.setdefault(p.index, []).append(p)
    for index, packages in groups.items():
        body += ["", f"# index {index}: {lock.indexes.get(index, '?')}", render_requirements(packages).rstrip("\n")]
    return "\n".join(head + body) + "\n"


def write_lock(lock: Lock, path: Path) -> Path:
    make_dir(path.parent)
    atomic_write_text(path, lock_text(lock))
    return path


def read_lock(path: Path, flag: str = "--lock") -> Lock:
    """A lock written by ascend-setup; anything else is bad input (never a traceback)."""
    text = read_input_text(path, "lock", hint=f"{flag} takes a lock made by 'ascend-setup plan --lock FILE'")
    return parse_lock(text, f"{flag} {path}")


def parse_lock(text: str, where: str) -> Lock:
    """The lock in `text` (a file's, or a bundle tar's member), `where` naming it in messages."""
    line = next((l for l in text.splitlines() if l.startswith(DATA_PREFIX)), None)
    if line is None:
        raise BadInput(
            f"{where} is not an ascend-setup lock (no '{DATA_PREFIX.strip()}' line)",
            hint="make one with 'ascend-setup plan --cann VERSION --lock FILE'",
        )
    data = parse_json(line[len(DATA_PREFIX) :], where, hint="make it again with 'ascend-setup plan --lock FILE'")
    try:
        return Lock.model_validate(data)
    except ValueError as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        at = f" at {'.'.join(str(p) for p in first['loc'])}: {first['msg']}" if first else f": {exc}"
        raise BadInput(
            f"{where} is a damaged lock{at}", hint="make it again with 'ascend-setup plan --lock FILE'"
        ) from None
