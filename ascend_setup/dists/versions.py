"""When two versions are the same, and when an installed one is the row's pin: the rules, written once
(packaging's PEP 440 comparison).

The local part counts. 2.10.0 is not 2.10.0+cpu, though pip's `==2.10.0` accepts both. A row that pins
torch 2.10.0 wants the Ascend build, not the PyTorch CPU index's +cpu one; a lock that says +cpu wants
that one. `same_release` drops the local part, for the question "which release is this?" (audit's
choice of a row): a +cu128 torch is still a torch 2.10.0 install, and audit then names it a CUDA build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from packaging.version import InvalidVersion, Version

VersionLike = Union[str, Version, None]


def _parsed(value: VersionLike) -> Optional[Version]:
    if value is None or isinstance(value, Version):
        return value
    try:
        return Version(value)
    except InvalidVersion:
        return None


def same_version(have: VersionLike, want: VersionLike) -> bool:
    """Exact equality, local part included (two strings that are no versions are compared as text)."""
    if have is None or want is None:
        return False
    a, b = _parsed(have), _parsed(want)
    if a is None or b is None:
        return str(have) == str(want)
    return a == b


def same_release(have: VersionLike, want: VersionLike) -> bool:
    """Equality of the public parts: 2.10.0+cpu is the release 2.10.0."""
    a, b = _parsed(have), _parsed(want)
    return a is not None and b is not None and a.public == b.public


def local_only_differs(have: VersionLike, want: VersionLike) -> bool:
    """2.10.0 installed where 2.10.0+cpu is locked (or the reverse): pip would call it satisfied."""
    return same_release(have, want) and not same_version(have, want)


#: Local labels a source build adds to the release it builds: vLLM's setup.py appends the target device,
#: and `VLLM_TARGET_DEVICE=empty` (how vLLM is built under vllm-ascend) gives `0.23.0+empty`.
SOURCE_BUILD_LOCALS = frozenset({"empty"})


@dataclass(frozen=True)
class PinVerdict:
    """What an installed version is to the row's pin: accepted or not, and what to say about it."""

    name: str
    found: Optional[str]
    pin: str
    accepted: bool
    note: str  # empty for the pin itself; else what was found and why it is (not) accepted

    def said(self) -> str:
        """One line: the version found, and the verdict."""
        return self.note or f"{self.name} {self.found} (the row's pin)"


def pin_verdict(name: str, found: VersionLike, pin: str) -> PinVerdict:
    """The row's pin is a release with its post releases, and with the local label a source build adds.

    The same release at a newer post release (0.23.0.post1 for 0.23.0: the bug-fix release) or built from
    source (0.23.0+empty) is accepted, with a note. An older post release, a different release, or another
    local label (+cu128 where the pin says none: a CUDA build) is refused, as an exact pin would be.
    """
    text = None if found is None else str(found)
    if text is None:
        return PinVerdict(name, None, pin, False, f"{name} is not installed; the row pins {pin}")
    if same_version(text, pin):
        return PinVerdict(name, text, pin, True, "")
    have, want = _parsed(text), _parsed(pin)
    refused = PinVerdict(name, text, pin, False, f"{name} {text} where the row pins {pin}")
    if (
        have is None
        or want is None
        or (have.epoch, have.release, have.pre, have.dev) != (want.epoch, want.release, want.pre, want.dev)
    ):
        return refused
    source_build = have.local != want.local and want.local is None and have.local in SOURCE_BUILD_LOCALS
    if have.local != want.local and not source_build:
        return refused
    have_post, want_post = have.post or 0, want.post or 0
    if have_post < want_post:
        return PinVerdict(name, text, pin, False, f"{name} {text} where the row pins {pin}: an older post release")
    why = []
    if have_post > want_post:
        why.append(f"a newer post release of the row's {pin} (bug fixes of the same release)")
    if source_build:
        why.append(f"a source build (+{have.local}) of {Version(text).public}")
    return PinVerdict(name, text, pin, True, f"{name} {text}: {' and '.join(why)}; accepted")
