"""Hugging Face (and any HF_ENDPOINT mirror) through huggingface_hub: its model_info(files_metadata=True)
gives the commit, sizes and LFS sha256s, and hf_hub_url the resolve URL. Its token handling (HF_TOKEN,
the saved login) applies, so gated models work as they do for the user's other tools.

Its get_safetensors_metadata is not used for the headers: its first request asks for 100 kB of each shard,
which for most shards is weight bytes, and it downloads the index into the user's HF cache. fit reads
exactly the 8-byte length and then the header (base.read_range), and caches in its own directory.
"""

from __future__ import annotations

import os
from typing import Optional

from ascend_setup.hub.base import HubNotFound, HubUnreachable, Listing, RemoteFile

DEFAULT_ENDPOINT = "https://huggingface.co"


def endpoint(flag: Optional[str] = None) -> str:
    return (flag or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


class HuggingFace:
    name = "huggingface"
    default_revision = "main"

    def __init__(self, endpoint_url: Optional[str] = None) -> None:
        self.endpoint = endpoint(endpoint_url)

    def listing(self, repo: str, revision: Optional[str]) -> Listing:
        from huggingface_hub import HfApi  # imported here: it is slow to import, and fit on a directory never needs it
        from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

        revision = revision or self.default_revision
        try:
            info = HfApi(endpoint=self.endpoint).model_info(repo, revision=revision, files_metadata=True, timeout=30)
        except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
            raise HubNotFound(f"Hugging Face {self.endpoint} has no model {repo} at {revision} "
                              f"({exc.__class__.__name__})") from None
        except Exception as exc:  # the library's HTTP stack (requests or httpx, by version) or a malformed answer
            raise HubUnreachable(f"Hugging Face {self.endpoint}: {exc.__class__.__name__}: {str(exc)[:120]}",
                                 hint="set HF_ENDPOINT to a reachable mirror, or use --source modelscope") from None
        files = [RemoteFile(s.rfilename, int(s.size or (s.lfs.size if s.lfs else 0) or 0),
                            s.lfs.sha256.lower() if s.lfs and s.lfs.sha256 else None) for s in info.siblings or []]
        return Listing("huggingface", self.endpoint, repo, revision, info.sha or revision, files)

    def url(self, listing: Listing, path: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(listing.repo, path, revision=listing.commit, endpoint=self.endpoint)
