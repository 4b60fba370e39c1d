"""Doctor's look at the indexes: each index the install would use is asked for one pinned project's page,
all at once, under one overall deadline (the reachability gate's asking, index/reach.py, with one pin per
index instead of all of them), and called reachable, slow, stale or unreachable, with the time it took.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence

from ascend_setup.index.reach import IndexNeed, check_indexes

#: The whole look, DNS included: doctor is a quick check, not the install's 10 s gate.
DOCTOR_INDEX_SECONDS = 5.0
#: An answer later than this is "slow": every package page of an install waits as long.
SLOW_SECONDS = 2.0


@dataclass
class IndexAnswer:
    name: str  # "mirror" or the row's index name
    url: str
    package: str  # the pin asked for, name==version
    status: str  # reachable | slow | stale | unreachable
    seconds: Optional[float]  # None: no answer within the deadline
    detail: str

    def to_json(self) -> Dict[str, Any]:
        return {**asdict(self), "seconds": None if self.seconds is None else round(self.seconds, 3)}

    def line(self) -> str:
        label = self.name if self.name == "mirror" else f"index {self.name}"
        took = f"{self.seconds:.1f} s" if self.seconds is not None else "no answer"
        if self.status == "reachable":
            return f"{label} ({self.url}) serves {self.package} in {took}"
        if self.status == "slow":
            return f"{label} ({self.url}) is slow: {self.package} took {took}"
        return f"{label} ({self.url}) is {self.status} ({took}): {self.detail}"


def ask_indexes(
    needs: Sequence[IndexNeed], *, within: float = DOCTOR_INDEX_SECONDS, slow: float = SLOW_SECONDS
) -> List[IndexAnswer]:
    """One answer per need (one index URL and one pin each): the whole look ends by `within` seconds,
    whatever the indexes do (a hanging DNS lookup is left behind, see deadline.py)."""
    answers = []
    for check in check_indexes(needs, deadline=within):
        ((package, version),) = check.need.pins.items()
        pin = f"{package}=={version}"
        if check.error or check.unanswered:
            status, detail = "unreachable", check.error or next(iter(check.unanswered.values()))
        elif check.missing:
            status, detail = "stale", f"does not serve {pin}: {next(iter(check.missing.values()))}"
        else:
            status, detail = ("slow" if (check.seconds or 0) > slow else "reachable"), ""
        # A request's own timeout can end it a hair before the deadline does (which one wins is the machine's
        # load): either way the index gave no answer within the look's time.
        seconds = check.seconds if check.seconds is not None and check.seconds < within else None
        answers.append(IndexAnswer(check.need.name, check.need.urls[0], pin, status, seconds, detail))
    return answers
