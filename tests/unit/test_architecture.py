"""The house's rules, read from the code: imports run one way (docs/development/architecture.md, whose table of
floors is checked here), the package root holds at most five modules, no two modules share a name, and the
simulated host in the wheel holds only what the demo runs."""

from __future__ import annotations

import re
from collections import Counter
from typing import Dict, List

from helpers.import_graph import PACKAGE, imports, modules, reachable, room

ARCHITECTURE_PAGE = PACKAGE.parent / "docs" / "development" / "architecture.md"

#: The floors of docs/development/architecture.md: a module imports only from its own floor or a lower one.
FLOORS = {
    "cli": 4,
    "commands": 4,
    "steps": 3,
    "audit": 3,
    "bundle": 3,
    "fit": 3,
    "hub": 3,
    "serve": 3,
    "fleet": 3,
    "mirrors": 3,
    "simulate": 3,
    "container": 3,
    "doctor": 3,
    "nodes": 3,
    "bench": 3,
    "engine": 2,
    "resolve": 2,
    "managed": 2,
    "index": 2,
    "matrix": 2,
    "host": 2,
    "dists": 2,
    "knowledge": 2,
    "sourcebuild": 2,
    "native": 2,
    "utils": 1,
    "errors": 0,
}


def test_every_folder_of_code_is_a_package() -> None:
    """A folder without __init__.py is a namespace package: setuptools' find leaves it out of the wheel, so
    `pip install .` would ship the tool without it while an editable install works."""
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    assert [str(f) for f in sorted(folders) if not (f / "__init__.py").exists()] == []


def test_every_room_has_a_floor() -> None:
    rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms - set(FLOORS) == set(), "a new room needs its floor here and in docs/development/architecture.md"


def test_imports_run_one_way() -> None:
    upward: List[str] = []
    for source, target, line in imports():
        here, there = room(source), room(target)
        if here in FLOORS and there in FLOORS and FLOORS[there] > FLOORS[here]:
            upward.append(f"{source}:{line} imports {target} (floor {FLOORS[here]} -> {FLOORS[there]})")
    assert not upward, "\n".join(upward)


def test_the_rule_sees_an_upward_import() -> None:
    """The check itself: a leaf importing a feature is caught (so an empty result above means something)."""
    assert FLOORS[room("ascend_setup.utils.procs")] < FLOORS[room("ascend_setup.knowledge.scan")]
    assert room("ascend_setup.errors") == "errors" and room("ascend_setup") == "(package)"


def test_the_root_keeps_at_most_five_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 5, root


def test_no_two_modules_share_a_name() -> None:
    names = Counter(p.stem for p in PACKAGE.rglob("*.py") if p.stem not in ("__init__", "__main__"))
    assert [n for n, c in names.items() if c > 1] == []


def test_the_page_draws_the_floors_the_rule_reads() -> None:
    """The floors' table of docs/development/architecture.md is drawn by hand: each room on it is on the floor
    the rule above holds it to, and every room is on it."""
    drawn: Dict[str, int] = {}
    for floor, rooms in re.findall(r"^\| (\d+)\.[^|]*\| ([^|]*) \|", ARCHITECTURE_PAGE.read_text(), re.MULTILINE):
        for name in re.findall(r"`([a-z_]+)(?:/|\.py)`", rooms):
            drawn[name] = int(floor)
    assert drawn == FLOORS


def test_the_simulated_host_holds_only_what_the_demo_runs() -> None:
    """simulate/ ships in the wheel for `demo`: a module there that the demo's imports never reach is a test
    fixture, whose place is tests/helpers."""
    demo = reachable("ascend_setup.commands.demo")
    fixtures = [m for m in modules() if m.startswith("ascend_setup.simulate.") and m not in demo]
    assert sorted(fixtures) == []
