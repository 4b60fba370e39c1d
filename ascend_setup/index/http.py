"""One HTTP client for the whole tool: a pooled session, retries with backoff, errors that name the index."""

from __future__ import annotations

import os
import ssl
import threading
from typing import Dict, Optional, Set, TypedDict, Union

import requests
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from ascend_setup import __version__
from ascend_setup.errors import AscendSetupError
from ascend_setup.index.trust import Trust, system_ca

USER_AGENT = f"ascend-setup/{__version__}"
_local = threading.local()


class _Trust(TypedDict):
    injected: bool  # truststore stands in for ssl's default context
    ca_bundle: Optional[str]  # pip's configured `cert`


_trust: _Trust = {"injected": False, "ca_bundle": None}
_trust_lock = threading.Lock()
TLS_HINT = (
    "ascend-setup trusts this system's CA store (and SSL_CERT_FILE) like pip does, plus pip's configured "
    "cert: where a proxy re-signs TLS, add its CA to the system store (update-ca-certificates) or set "
    "'pip config set global.cert /path/to/site-ca.pem'"
)

#: How a certificate the run's CA set does not trust is named, by every client: a caller that reports a failure
#: in its own words (the gate, mirrors, the hubs) recognises it by this and gives TLS_HINT.
UNTRUSTED = "its certificate is not trusted"


def use_system_trust() -> None:
    """Verify TLS with the operating system's trust store (as pip does), not requests' bundled certifi:
    behind a proxy that re-signs TLS with a site CA, pip worked and the tool did not.

    Once, under a lock, and marked done only when done: the gate's threads all open sessions at once, and
    one that made an SSL context while another was swapping the class in recursed until Python gave up
    (the gate then reported a page that "did not answer")."""
    with _trust_lock:
        if _trust["injected"]:
            return
        try:
            import truststore

            truststore.inject_into_ssl()
        except ImportError:  # Python 3.8 and 3.9: no truststore; _verify() finds the system's bundle instead
            pass
        _trust["injected"] = True


def use_trust(trust: Trust) -> None:
    """The run's trust decision (pip's configured `cert`, else the system store), for every request this
    process makes from now on; pip and uv are given the same one."""
    _trust["ca_bundle"] = trust.bundle
    _local.__dict__.pop("session", None)


def verify() -> Union[str, bool]:
    """The run's CA set as requests takes it (a bundle file or directory; True: the client's own roots, on a host
    with no store at all): what our sessions use, and what a library with its own HTTP stack is handed."""
    use_system_trust()
    return _verify()


def ssl_context() -> ssl.SSLContext:
    """The same CA set as an SSLContext, for a client that takes one (httpx)."""
    where = verify()
    if where is True or where is False:
        return ssl.create_default_context()
    if os.path.isdir(where):
        return ssl.create_default_context(capath=where)
    return ssl.create_default_context(cafile=where)


def _verify() -> Union[str, bool]:
    bundle = _trust["ca_bundle"]
    if bundle:
        return bundle
    # The system store as a file (or directory) found once, the same one the decision gave uv: truststore alone
    # takes OpenSSL's compiled-in directory where it exists, and a Python built with another prefix (the glibc
    # 2.31 root's) missed the CA that update-ca-certificates had put in the distribution's bundle.
    return system_ca() or True


class IndexUnreachable(AscendSetupError):
    """The index could not be asked at all: DNS, refused connection, TLS, timeout, 5xx after retries."""


class ServerError(Exception):
    def __init__(self, response: requests.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def session() -> requests.Session:
    """A session per thread (requests sessions are not thread-safe to share)."""
    s = getattr(_local, "session", None)
    if s is None:
        use_system_trust()
        s = requests.Session()
        s.verify = _verify()
        s.headers["User-Agent"] = USER_AGENT
        adapter = requests.adapters.HTTPAdapter(pool_connections=16, pool_maxsize=16)
        s.mount("http://", adapter)
        s.mount("https://", adapter)
        _local.session = s
    return s


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, requests.exceptions.SSLError):
        return False
    return isinstance(exc, (requests.ConnectionError, requests.Timeout, ServerError))


def _tls_reason(exc: BaseException) -> str:
    text = str(exc)
    for marker in (
        "self-signed certificate in certificate chain",
        "unable to get local issuer certificate",
        "certificate has expired",
        "Hostname mismatch",
        "self signed certificate",
    ):
        if marker.lower() in text.lower():
            return marker
    return "CERTIFICATE_VERIFY_FAILED" if "CERTIFICATE_VERIFY_FAILED" in text else exc.__class__.__name__


def untrusted_certificate(exc: BaseException) -> Optional[str]:
    """Why TLS failed, when `exc` (or what it was raised from) is a certificate the CA set does not trust: for a
    library with its own HTTP stack (huggingface_hub's requests or httpx), whose errors wrap ssl's."""
    seen: Set[int] = set()
    cause: Optional[BaseException] = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(cause):
            return _tls_reason(cause)
        cause = cause.__cause__ or cause.__context__
    return None


def network_cause(exc: BaseException, timeout: float) -> str:
    """What went wrong on the wire, in words: DNS, refused, timed out, reset."""
    text = repr(exc)
    if (
        "NameResolution" in text
        or "Name or service not known" in text
        or "getaddrinfo" in text
        or "Temporary failure in name resolution" in text
    ):
        return "DNS lookup failed"
    if isinstance(exc, requests.ConnectTimeout) or "ConnectTimeout" in text:
        return f"no connection within {timeout:g} s"
    if isinstance(exc, requests.Timeout) or "Read timed out" in text:
        return f"no answer within {timeout:g} s"
    if "Connection refused" in text or "ECONNREFUSED" in text:
        return "connection refused"
    if "reset" in text.lower():
        return "connection reset"
    return exc.__class__.__name__


def get(
    url: str,
    *,
    headers: Optional[Dict[str, str]] = None,
    timeout: float = 30.0,
    stream: bool = False,
    attempts: int = 3,
) -> requests.Response:
    """GET with retries on connection errors and 5xx; 4xx comes back to the caller to interpret."""

    @retry(
        retry=retry_if_exception(_transient),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=0.2, max=2),
        reraise=True,
    )
    def attempt() -> requests.Response:
        response = session().get(url, headers=headers, timeout=timeout, stream=stream)
        if response.status_code >= 500:
            response.close()
            raise ServerError(response)
        return response

    try:
        return attempt()
    except requests.exceptions.SSLError as exc:
        what = UNTRUSTED if "CERTIFICATE_VERIFY_FAILED" in str(exc) else "TLS failed"
        raise IndexUnreachable(f"{url}: {what} ({_tls_reason(exc)})", hint=TLS_HINT) from None
    except ServerError as exc:
        raise IndexUnreachable(f"{url} answered {exc}") from None
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise IndexUnreachable(
            f"{url} could not be reached ({network_cause(exc, timeout)})",
            hint="check the URL and the network, or pick another mirror",
        ) from None
    except requests.RequestException as exc:
        raise IndexUnreachable(f"{url}: {exc}") from None
