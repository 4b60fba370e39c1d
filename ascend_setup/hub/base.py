"""What fit and model fetch need of a hub, whichever it is: a listing (sizes, sha256 where published,
the commit it resolves to) and a URL per file that answers HTTP Range requests."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.index.http import IndexUnreachable, get

#: owner/name, as both hubs spell model ids (a path that does not exist is not taken for one).
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
SOURCES = ("modelscope", "huggingface")


class HubNotFound(BadInput):
    """The hub answered, and has no such model or revision."""


class HubUnreachable(AscendSetupError):
    """The hub could not be asked (DNS, refused, TLS, 5xx)."""


@dataclass
class RemoteFile:
    path: str
    size: int
    sha256: Optional[str] = None  # published for LFS files (Hugging Face), for every file (ModelScope)


@dataclass
class Listing:
    source: str
    endpoint: str
    repo: str
    revision: str
    commit: str
    files: List[RemoteFile] = field(default_factory=list)

    def get(self, path: str) -> Optional[RemoteFile]:
        return next((f for f in self.files if f.path == path), None)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> Listing:
        return cls(**{**data, "files": [RemoteFile(**f) for f in data["files"]]})


def check_model_id(model_id: str) -> str:
    if not MODEL_ID.match(model_id) or ".." in model_id:
        raise BadInput(
            f"MODEL {model_id!r} is neither a local path nor a hub id (owner/name)",
            hint="e.g. Qwen/Qwen3-8B, or a model directory",
        )
    return model_id


def read_range(url: str, start: int, length: int, *, what: str) -> bytes:
    """Exactly `length` bytes from `start` (a Range request; the redirect to the CDN is followed). A server
    that ignores Range is read no further than asked, then the connection is closed."""
    try:
        response = get(url, headers={"Range": f"bytes={start}-{start + length - 1}"}, stream=True, timeout=30)
    except IndexUnreachable as exc:
        raise HubUnreachable(exc.message, hint=exc.hint) from None
    with response:
        if response.status_code not in (200, 206):
            raise HubUnreachable(f"{what}: HTTP {response.status_code} for bytes {start}-{start + length - 1}")
        if response.status_code == 200 and start:
            raise HubUnreachable(f"{what}: the server ignores HTTP Range requests", hint="use another endpoint")
        data = b""
        for chunk in response.iter_content(min(length, 1 << 16)):
            data += chunk
            if len(data) >= length:
                break
    return data[:length]


def read_small(url: str, *, what: str, limit: int = 16 * 1024 * 1024) -> str:
    """A small file's text (config.json, the index): refused past `limit`, never a weight file."""
    try:
        response = get(url, stream=True, timeout=30)
    except IndexUnreachable as exc:
        raise HubUnreachable(exc.message, hint=exc.hint) from None
    with response:
        if response.status_code != 200:
            raise HubUnreachable(f"{what}: HTTP {response.status_code}")
        data = b""
        for chunk in response.iter_content(1 << 16):
            data += chunk
            if len(data) > limit:
                raise BadInput(f"{what} is larger than {limit:,} bytes: not a model's small file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{what} is not UTF-8 text") from None
