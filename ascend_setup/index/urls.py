"""What an index URL is, written once: pip and uv reach an index over http(s) or read a file:// tree, and
take nothing else. The matrix, the flags and pip's own configuration are checked by it."""

from __future__ import annotations

from urllib.parse import urlparse


def is_index_url(text: str) -> bool:
    parsed = urlparse(text)
    return parsed.scheme in ("http", "https", "file") and (parsed.scheme == "file" or bool(parsed.netloc))
