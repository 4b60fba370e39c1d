"""The house's rules, read from the code: imports run one way (docs/development/architecture.md), the package
root holds at most five modules, and no two modules share a name."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Iterator, List, Tuple

PACKAGE = Path(__file__).resolve().parents[2] / "ascend_setup"

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


def room(module: str) -> str:
    """`ascend_setup.steps.venv` -> `steps`; the package itself and its root modules are their own room."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(package)"


def imports() -> Iterator[Tuple[str, str, int]]:
    """(importing module, imported module, line) for every import of the package inside the package."""
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "ascend_setup":
                    names = [f"ascend_setup.{a.name}" for a in node.names]
                else:
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("ascend_setup."):
                    yield module, name, node.lineno


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
