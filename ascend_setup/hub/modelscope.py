"""ModelScope's HTTP API, spoken with requests (the tool's one HTTP client).

Why not the modelscope SDK: it brings its own stack (oss2, datasets, addict, ...) for what is two GET
endpoints here, the file listing and the file download, and it writes into its own cache. The endpoint is
the SDK's: https:// + MODELSCOPE_DOMAIN (www.modelscope.cn by default), so a mirror set for the SDK works.
"""

from __future__ import annotations

import json
import os
from typing import List, Optional
from urllib.parse import quote, urlencode

from pydantic import BaseModel, ConfigDict, ValidationError

from ascend_setup.hub.base import HubNotFound, HubUnreachable, Listing, RemoteFile
from ascend_setup.index.http import IndexUnreachable, get

DEFAULT_DOMAIN = "www.modelscope.cn"


class _File(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Path: str
    Type: str = "blob"
    Size: int = 0
    Sha256: Optional[str] = None
    Revision: Optional[str] = None


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Files: List[_File]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Code: int = 200
    Data: Optional[_Data] = None
    Message: Optional[str] = None


def endpoint(flag: Optional[str] = None) -> str:
    value = flag or os.environ.get("MODELSCOPE_DOMAIN") or DEFAULT_DOMAIN
    return (value if "://" in value else "https://" + value).rstrip("/")


class ModelScope:
    name = "modelscope"
    default_revision = "master"

    def __init__(self, endpoint_url: Optional[str] = None) -> None:
        self.endpoint = endpoint(endpoint_url)

    def listing(self, repo: str, revision: Optional[str]) -> Listing:
        revision = revision or self.default_revision
        url = f"{self.endpoint}/api/v1/models/{quote(repo)}/repo/files?" + urlencode(
            {"Revision": revision, "Recursive": "true"}
        )
        try:
            response = get(url, timeout=30)
        except IndexUnreachable as exc:
            raise HubUnreachable(f"ModelScope: {exc.message}", hint=exc.hint) from None
        if response.status_code in (401, 403, 404):
            raise HubNotFound(
                f"ModelScope {self.endpoint} has no model {repo} at {revision} (HTTP {response.status_code})"
            )
        if response.status_code != 200:
            raise HubUnreachable(f"ModelScope {url}: HTTP {response.status_code}")
        try:
            answer = _Answer.model_validate(json.loads(response.text))
        except (ValueError, RecursionError, ValidationError):
            raise HubUnreachable(f"ModelScope {url} did not answer with a file listing") from None
        if answer.Code != 200 or answer.Data is None:
            raise HubNotFound(
                f"ModelScope {self.endpoint} has no model {repo} at {revision} "
                f"({(answer.Message or str(answer.Code))[:80]})"
            )
        blobs = [f for f in answer.Data.Files if f.Type == "blob"]
        commit = next((f.Revision for f in blobs if f.Revision), None) or revision
        return Listing(
            "modelscope",
            self.endpoint,
            repo,
            revision,
            commit,
            [RemoteFile(f.Path, f.Size, (f.Sha256 or "").lower() or None) for f in blobs],
        )

    def url(self, listing: Listing, path: str) -> str:
        return f"{self.endpoint}/api/v1/models/{quote(listing.repo)}/repo?" + urlencode(
            {"Revision": listing.commit, "FilePath": path}
        )
