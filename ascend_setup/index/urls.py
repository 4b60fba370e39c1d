"""What an index URL is, written once: pip and uv reach an index over http(s) or read a file:// tree, and
take nothing else. The matrix, the flags and pip's own configuration are checked by it."""

from __future__ import annotations

from typing import Dict, Optional, Sequence
from urllib.parse import urlparse

from ascend_setup.errors import BadInput


def is_index_url(text: str) -> bool:
    parsed = urlparse(text)
    return parsed.scheme in ("http", "https", "file") and (parsed.scheme == "file" or bool(parsed.netloc))


def index_overrides(values: Optional[Sequence[str]]) -> Dict[str, str]:
    """`--index` given again and again (each checked by `index_override`) -> {name: url}; one name with two
    URLs is bad input."""
    found: Dict[str, str] = {}
    for value in values or []:
        name, _, url = str(value).partition("=")
        if found.get(name, url) != url:
            raise BadInput(f"--index {name}= is given twice with different URLs ({found[name]} and {url}): give one")
        found[name] = url
    return found
