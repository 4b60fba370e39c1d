"""Texts read out of distribution files (core metadata, an sdist's pyproject.toml), kept on disk by the
file's sha256. A file's content never changes, so neither does what was read from it: the next plan or
install reads it from here instead of the network (on the real index that was most of a second)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

from ascend_setup.utils.files import atomic_write_text

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class FileTextCache:
    def __init__(self, root: Optional[Path]) -> None:
        self.root = root

    def _path(self, sha256: Optional[str], what: str) -> Optional[Path]:
        if self.root is None or not sha256 or not _SHA256.match(sha256):
            return None  # no hash, nothing to key on: read every time
        return self.root / what / sha256[:2] / f"{sha256}.txt"

    def text(self, sha256: Optional[str], what: str, read: Callable[[], str]) -> str:
        """The cached text, else `read()`, kept for next time (a cache that cannot be written is no cache)."""
        path = self._path(sha256, what)
        if path is not None:
            try:
                return path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                pass
        text = read()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(path, text)
            except OSError:
                pass
        return text
