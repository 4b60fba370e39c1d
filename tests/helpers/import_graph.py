"""The package's import graph, read from the code (every `import` and `from ... import` of ascend_setup inside
ascend_setup, wherever it stands: a function's lazy import counts): what the architecture test holds to the
floors, the demo's reach, and the manual's generated picture of the rooms (docs/hooks.py)."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

PACKAGE = Path(__file__).resolve().parents[2] / "ascend_setup"


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


@lru_cache(maxsize=None)
def modules() -> Dict[str, Set[str]]:
    """Each module of the package (a package by its own name), with the modules its imports load: the imported
    module and every package above it (`from a.b import c` loads a, a.b, and a.b.c when c is a module)."""

    def named(path: Path) -> str:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    graph: Dict[str, Set[str]] = {named(p): set() for p in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                graph[named(path)].update(
                    p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in graph
                )
    return graph


def reachable(start: str) -> Set[str]:
    """Every module importing `start` can load, `start` included."""
    graph, seen, todo = modules(), set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def room_levels() -> List[Tuple[int, str, List[str]]]:
    """(level, room, the rooms it imports) for every room: a room that imports nothing of the package is on
    level 1, any other one level above the highest room it imports (rooms that import each other share one)."""
    rooms: Dict[str, Set[str]] = {}
    for source, targets in modules().items():
        rooms.setdefault(room(source), set()).update(room(t) for t in targets if room(t) != room(source))
    cycle = {r: frozenset(o for o in rooms if r in _above(rooms, o) and o in _above(rooms, r)) | {r} for r in rooms}

    @lru_cache(maxsize=None)
    def level(r: str) -> int:
        below = {t for m in cycle[r] for t in rooms[m]} - cycle[r]
        return 1 + max((level(t) for t in below), default=0)

    return sorted(((level(r), r, sorted(rooms[r])) for r in rooms), key=lambda x: (x[0], x[1]))


def _above(rooms: Dict[str, Set[str]], start: str) -> Set[str]:
    """The rooms `start` imports, directly or through others."""
    seen: Set[str] = set()
    todo = list(rooms[start])
    while todo:
        r = todo.pop()
        if r not in seen:
            seen.add(r)
            todo.extend(rooms[r])
    return seen
