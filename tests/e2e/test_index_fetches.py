"""One install fetches each index page once: the gates, the mirror check, the closure and the plan share one
index session (they once fetched `/simple/vllm/` and each torch page 4 times per install)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ascend_setup.index.http import USER_AGENT

#: How often one install may ask for one project page itself (pip and uv ask for their own); it was 3.
MOST_FETCHES_PER_PAGE = 1


def our_page_fetches(stack) -> Counter:
    """(index, /simple/<name>/) -> how often ascend-setup itself asked for it (pip and uv have other agents)."""
    counts: Counter = Counter()
    for name, index in (("main", stack.main), ("ascend", stack.ascend), ("pytorch-cpu", stack.pytorch_cpu)):
        for path, headers in index.requests:
            agent = headers.get("User-Agent", "")
            if path.startswith("/simple/") and path.count("/") == 3 and agent == USER_AGENT:
                counts[(name, path)] += 1
    return counts


def test_one_install_fetches_each_page_once(wheel_stack, tmp_path: Path) -> None:
    for index in (wheel_stack.main, wheel_stack.ascend, wheel_stack.pytorch_cpu):
        index.requests.clear()
    proc = wheel_stack.install(tmp_path / "wd", "--installer", "uv")
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = our_page_fetches(wheel_stack)
    assert counts[("main", "/simple/vllm/")] >= 1 and counts[("pytorch-cpu", "/simple/torch/")] >= 1, counts
    print("page fetches per install:", dict(sorted(counts.items())))
    assert max(counts.values()) <= MOST_FETCHES_PER_PAGE, counts
