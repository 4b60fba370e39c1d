"""huggingface_hub is handed the run's trust decision, whichever HTTP stack the installed release has: 1.x/2.x
(httpx; the client factory) where the tool runs on 3.10+, 0.36 (requests; the HTTP backend) where pip picks it
for Python 3.8, which CI's 3.8 run of this tier installs. In process: the library's session is inspected, no
request is made (tests/functional/test_tls.py makes them, against a site CA's hub)."""

from __future__ import annotations

import ssl

import pytest

from ascend_setup.hub import huggingface
from ascend_setup.index import http


@pytest.fixture
def hub_library(monkeypatch):
    """huggingface_hub with our decision stubbed (a bundle path and the context made of it), put back to the
    library's own default afterwards so that no other test sees our client."""
    import huggingface_hub

    context = ssl.create_default_context()
    monkeypatch.setattr(huggingface, "_handed", {})
    monkeypatch.setattr(http, "verify", lambda: "/site/ca-bundle.pem")
    monkeypatch.setattr(http, "ssl_context", lambda: context)
    yield huggingface_hub, context
    if hasattr(huggingface_hub, "set_client_factory"):
        from huggingface_hub.utils import _http as hf_http

        huggingface_hub.set_client_factory(hf_http.default_client_factory)
    else:
        huggingface_hub.configure_http_backend()


def test_the_hubs_session_trusts_the_runs_ca_set_and_keeps_the_librarys_defaults(hub_library) -> None:
    library, context = hub_library
    huggingface.hand_trust_to_huggingface_hub()
    session = library.get_session()
    if hasattr(library, "set_client_factory"):  # httpx: the TLS context is fixed in the client's connection pool
        assert session._transport._pool._ssl_context is context
        from huggingface_hub.utils import _http as hf_http

        assert hf_http.hf_request_event_hook in session.event_hooks["request"]  # offline mode, request ids
        assert session.follow_redirects
    else:  # requests
        assert session.verify == "/site/ca-bundle.pem"
        from huggingface_hub.utils import _http as hf_http

        assert isinstance(session.get_adapter("https://x"), (hf_http.UniqueRequestIdAdapter, hf_http.OfflineAdapter))


def test_the_hub_is_configured_once_per_decision(hub_library, monkeypatch) -> None:
    library, _ = hub_library
    huggingface.hand_trust_to_huggingface_hub()
    first = library.get_session()
    huggingface.hand_trust_to_huggingface_hub()
    assert library.get_session() is first  # the same decision: the library's pooled session is kept
    monkeypatch.setattr(http, "verify", lambda: "/another/ca-bundle.pem")
    huggingface.hand_trust_to_huggingface_hub()
    assert library.get_session() is not first  # a new decision (pip's cert set later in the run): a new session
