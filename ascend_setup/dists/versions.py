"""When two versions are the same: the one rule, written once (packaging's PEP 440 comparison).

The local part counts. 2.10.0 is not 2.10.0+cpu, though pip's `==2.10.0` accepts both. A row that pins
torch 2.10.0 wants the Ascend build, not the PyTorch CPU index's +cpu one; a lock that says +cpu wants
that one. `same_release` drops the local part, for the question "which release is this?" (audit's
choice of a row): a +cu128 torch is still a torch 2.10.0 install, and audit then names it a CUDA build.
"""

from __future__ import annotations

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
