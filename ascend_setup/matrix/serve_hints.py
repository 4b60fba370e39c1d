"""Serving hints as arguments a person can paste, and hints the plugin's own source has outgrown.

vLLM parses `--additional-config` with plain argparse `store`: of two such flags only the last counts, so two
hints that each set one (the fusion switch, FlashComm1) would silently cancel each other. Every place that
prints serve arguments passes them through `merged_serve_args`, which makes them one JSON object.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from ascend_setup.matrix.models import Row, RuntimeHint

ADDITIONAL_CONFIG = "--additional-config"


def deep_merge(into: Dict[str, Any], more: Dict[str, Any]) -> Dict[str, Any]:
    """`more` into `into`, key by key (a sub-object merges, anything else replaces)."""
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = value
    return into


def merged_serve_args(args: Iterable[str]) -> List[str]:
    """`args` with every `--additional-config JSON` (or `--additional-config=JSON`) merged, key by key, into one
    flag at the place of the first; the other arguments stay as they were, in order."""
    out: List[str] = []
    merged: Optional[Dict[str, Any]] = None
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        text = None
        if arg == ADDITIONAL_CONFIG and i + 1 < len(items):
            text, i = items[i + 1], i + 2
        elif arg.startswith(ADDITIONAL_CONFIG + "="):
            text, i = arg.split("=", 1)[1], i + 1
        else:
            out.append(arg)
            i += 1
            continue
        value = json.loads(text)
        if merged is None:
            merged = {}
            out += [ADDITIONAL_CONFIG, ""]  # its place: filled in once everything is merged
        deep_merge(merged, value)
    if merged is not None:
        out[out.index(ADDITIONAL_CONFIG) + 1] = json.dumps(merged)
    return out


def quoted(args: Iterable[str]) -> str:
    """Arguments as a shell line: JSON and anything with a space in single quotes."""
    return " ".join(f"'{a}'" if " " in a or "{" in a else a for a in args)


def _source_texts(sdist: Path) -> Iterable[str]:
    """The plugin's Python sources in its sdist (not its tests or docs)."""
    with tarfile.open(sdist) as archive:
        for member in archive:
            parts = member.name.split("/")
            if member.isfile() and member.name.endswith(".py") and "tests" not in parts and len(parts) > 2:
                handle = archive.extractfile(member)
                if handle is not None:
                    yield handle.read().decode("utf-8", errors="replace")


def unread_variables(hints: Iterable[RuntimeHint], sdist: Path) -> List[str]:
    """One line per hint that sets an environment variable the plugin's source (in `sdist`) no longer reads."""
    wanted = {var: hint for hint in hints for var in hint.env}
    if not wanted:
        return []
    unseen = set(wanted)
    for text in _source_texts(sdist):
        unseen = {var for var in unseen if var not in text}
        if not unseen:
            break
    return [f"hint {wanted[var].id}: {sdist.name}'s source no longer reads {var}" for var in sorted(unseen)]


def hint_lines(row: Row) -> List[str]:
    """The row's serving hints as lines a person can act on (text, env, serve arguments), then, when several
    set --additional-config, the one flag that carries them all."""
    lines, config_args = [], []
    for hint in row.hints():
        extra = " ".join(f"{k}={v}" for k, v in hint.env.items())
        lines.append(" ".join(filter(None, [hint.text, extra, quoted(hint.serve_args)])))
        if ADDITIONAL_CONFIG in hint.serve_args:
            config_args += [ADDITIONAL_CONFIG, hint.serve_args[hint.serve_args.index(ADDITIONAL_CONFIG) + 1]]
    if len(config_args) > 2:
        lines.append(
            "vLLM keeps only the last --additional-config: for several of these, give them as one: "
            + quoted(merged_serve_args(config_args))
        )
    return lines
