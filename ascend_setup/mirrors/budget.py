"""The ranking's share of `mirrors --budget`: the budget is the command's wall time, so its start-up (the
interpreter, the imports, the interpreter search) comes off the ranking's share, and a little is kept for
writing the answer and exiting."""

from __future__ import annotations

from ascend_setup.utils.run_context import elapsed

#: Seconds of --budget kept for rendering, the cache file and the interpreter's exit.
EXIT_RESERVE = 0.15
#: Half of it is the ranking's at least: a start-up slowed by a loaded host must not leave it too little time to
#: hear a good index (that overruns --budget, and is rarer than a dropped index is harmful).
RANKING_SHARE_MIN = 0.5


def ranking_budget(budget: float) -> float:
    """The seconds left to rank the mirrors in, of a command given `budget` seconds, read when it is called."""
    return max(budget * RANKING_SHARE_MIN, budget - elapsed() - EXIT_RESERVE)
