"""The literal text a regex needs: a line that holds none of it cannot match, and an `in` test says so faster than the
regex's search (triage tries ~80 signatures on every error line of a log that may hold a million of them).

Read from the pattern itself (its parse tree), so a signature's guard can never drift from its pattern.
"""

from __future__ import annotations

import re
import sys
from typing import Any, List, Optional, Pattern, Sequence, Tuple

if sys.version_info >= (3, 11):
    import re._constants as _sre  # sre_parse is deprecated from 3.11, where these moved
    import re._parser as _parse
else:  # pragma: no cover - the 3.8-3.10 spelling
    import sre_constants as _sre
    import sre_parse as _parse

MIN_GUARD = 3  # shorter literals ("a ", "|") are in most lines: no guard then


def _branch_literal(items: Sequence[Tuple[Any, Any]]) -> str:
    """The longest run of literal characters one alternative must contain (a group that is not optional counts)."""
    best, run = "", ""
    for op, av in items:
        if op is _sre.LITERAL:
            run += chr(av)
            best = max(best, run, key=len)
            continue
        run = ""
        if op is _sre.SUBPATTERN:
            inner = _alternatives(av[-1])
            if inner is not None and len(inner) == 1 and len(inner[0]) > len(best):
                best = inner[0]
    return best


def _alternatives(parsed: Any) -> Optional[Tuple[str, ...]]:
    items: List[Tuple[Any, Any]] = list(parsed)
    branches = items[0][1][1] if len(items) == 1 and items[0][0] is _sre.BRANCH else [items]
    found = tuple(_branch_literal(list(branch)) for branch in branches)
    return None if any(len(literal) < MIN_GUARD for literal in found) else found


def required_literals(pattern: Pattern[str]) -> Optional[Tuple[str, ...]]:
    """Strings one of which every match contains, or None when the pattern needs none long enough (or ignores
    case)."""
    if pattern.flags & re.IGNORECASE:
        return None
    return _alternatives(_parse.parse(pattern.pattern, pattern.flags))
