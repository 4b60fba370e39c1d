"""Reading requirement lists (a distribution's Requires-Dist): which requirements parse, and which hold where.
One place for the marker rule: a requirement counts when its marker holds in the target's environment
(`extra` is "", so an extra's requirements are not direct ones); an unreadable one is passed over."""

from __future__ import annotations

from typing import Iterable, Iterator, List, Mapping

from packaging.requirements import InvalidRequirement, Requirement


def requirements(texts: Iterable[str]) -> Iterator[Requirement]:
    """The requirements that parse (metadata in the wild has lines packaging refuses: they are passed over)."""
    for text in texts:
        try:
            yield Requirement(text)
        except InvalidRequirement:
            continue


def applicable(texts: Iterable[str], env: Mapping[str, str]) -> List[Requirement]:
    """Requirements whose markers hold in `env`."""
    return [r for r in requirements(texts) if r.marker is None or r.marker.evaluate(dict(env))]
