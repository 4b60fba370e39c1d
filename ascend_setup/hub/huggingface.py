"""Hugging Face (and any HF_ENDPOINT mirror) through huggingface_hub: its model_info(files_metadata=True)
gives the commit, sizes and LFS sha256s, and hf_hub_url the resolve URL. Its token handling (HF_TOKEN,
the saved login) applies, so gated models work as they do for the user's other tools.

Its get_safetensors_metadata is not used for the headers: its first request asks for 100 kB of each shard,
which for most shards is weight bytes, and it downloads the index into the user's HF cache. fit reads
exactly the 8-byte length and then the header (base.read_range), and caches in its own directory.
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING, Callable, Dict, Optional, Union

from ascend_setup.hub.base import HubNotFound, HubUnreachable, Listing, RemoteFile
from ascend_setup.index import http

if TYPE_CHECKING:
    import requests

DEFAULT_ENDPOINT = "https://huggingface.co"
#: The CA set huggingface_hub was last handed (http.verify()'s answer), so a second listing re-configures nothing.
_handed: Dict[str, Union[str, bool]] = {}


def hand_trust_to_huggingface_hub() -> None:
    """Give huggingface_hub the run's trust decision (index/trust.py; pip's cert, else the system store), the one
    our HTTP client, pip and uv get. Left alone, it trusts something else: huggingface_hub 2.x (httpx) OpenSSL's
    compiled-in paths only, which a Python built with another prefix lacks; 0.36 (requests, the last for Python
    3.8) certifi only. A site CA in the system store failed `model fetch` while the rest of the run passed.

    Here, and only here, because this module is the tool's one user of huggingface_hub and imports it lazily (it is
    slow to import; fit on a directory never needs it): configuring it anywhere earlier would import it in every
    run. Through the library's own hook for "custom certifications", not SSL_CERT_FILE/REQUESTS_CA_BUNDLE in
    os.environ: that would change every other client of the process too, and each major version reads a different
    variable. The hook is chosen by what the library has (feature detection, not its version number): 1.x and 2.x
    have set_client_factory (httpx, and httpx2 from 2.x: the client's class is taken from the library's own
    default client, so both work); 0.x has configure_http_backend (requests). Model files never go through
    huggingface_hub: fetch downloads them with our own client (index/download.py), which has the decision already."""
    import huggingface_hub

    where = http.verify()
    if _handed.get("verify") == where:
        return
    set_client_factory = getattr(huggingface_hub, "set_client_factory", None)
    if set_client_factory is not None:
        set_client_factory(_httpx_factory())
    else:
        configure_http_backend = huggingface_hub.configure_http_backend  # 0.x only
        configure_http_backend(backend_factory=_requests_factory(configure_http_backend, where))
    _handed["verify"] = where


def _httpx_factory() -> Callable[[], object]:
    """huggingface_hub 1.x/2.x: its own default client (event hooks: offline mode, request ids; redirects,
    timeout, headers), rebuilt with our SSL context: an httpx client's TLS is fixed when it is made."""
    from huggingface_hub.utils import _http as hf_http

    context = http.ssl_context()
    default = hf_http.default_client_factory

    def factory() -> object:  # the library's own client class: httpx's in 1.x, httpx2's in 2.x
        base = default()
        try:
            return type(base)(
                verify=context,
                event_hooks=base.event_hooks,
                follow_redirects=base.follow_redirects,
                timeout=base.timeout,
                headers=base.headers,
                trust_env=base.trust_env,
            )
        finally:
            base.close()

    return factory


def _requests_factory(
    configure_http_backend: Callable[..., None], where: Union[str, bool]
) -> Callable[[], requests.Session]:
    """huggingface_hub 0.x: its default session (the offline and request-id adapters), with our `verify`."""
    default = inspect.signature(configure_http_backend).parameters["backend_factory"].default

    def factory() -> requests.Session:
        session: requests.Session = default()
        session.verify = where
        return session

    return factory


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
        hand_trust_to_huggingface_hub()
        try:
            info = HfApi(endpoint=self.endpoint).model_info(repo, revision=revision, files_metadata=True, timeout=30)
        except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
            raise HubNotFound(
                f"Hugging Face {self.endpoint} has no model {repo} at {revision} ({exc.__class__.__name__})"
            ) from None
        except Exception as exc:  # the library's HTTP stack (requests or httpx, by version) or a malformed answer
            why = http.untrusted_certificate(exc)
            if why:
                raise HubUnreachable(
                    f"Hugging Face {self.endpoint}: {http.UNTRUSTED} ({why})", hint=http.TLS_HINT
                ) from None
            raise HubUnreachable(
                f"Hugging Face {self.endpoint}: {exc.__class__.__name__}: {str(exc)[:120]}",
                hint="set HF_ENDPOINT to a reachable mirror, or use --source modelscope",
            ) from None
        files = [
            RemoteFile(
                s.rfilename,
                int(s.size or (s.lfs.size if s.lfs else 0) or 0),
                s.lfs.sha256.lower() if s.lfs and s.lfs.sha256 else None,
            )
            for s in info.siblings or []
        ]
        return Listing("huggingface", self.endpoint, repo, revision, info.sha or revision, files)

    def url(self, listing: Listing, path: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(listing.repo, path, revision=listing.commit, endpoint=self.endpoint)
