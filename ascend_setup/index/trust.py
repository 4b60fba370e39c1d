"""One trust decision for every network client of a run: the tool's HTTP, pip and uv verify TLS against the
same CA set. A company proxy that re-signs TLS has its CA in the system store: our client and pip trusted it,
while uv used its own bundled roots and failed `plan` with `invalid peer certificate: UnknownIssuer`."""

from __future__ import annotations

import os
import re
import ssl
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Mapping, Optional, Sequence, Tuple

from ascend_setup.utils.procs import capture

#: The first uv that reads UV_SYSTEM_CERTS; older ones take the same switch as UV_NATIVE_TLS (the name the
#: newer ones deprecate). The floor in pyproject (uv>=0.8) admits both.
UV_SYSTEM_CERTS_SINCE = (0, 11, 0)


#: Where distributions keep the system's CA bundle (Debian/Ubuntu, then Fedora/RHEL), after OpenSSL's own default.
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


@dataclass(frozen=True)
class Trust:
    """The CA set: `bundle`, pip's configured `cert` (a PEM file or a directory of them); else the system store
    (`system`) as OpenSSL finds it, SSL_CERT_FILE and SSL_CERT_DIR included; else, on a host with no store at
    all, each client's own bundled roots (certifi, uv's)."""

    bundle: Optional[str] = None
    system: bool = False

    def uv_env(self, uv: Sequence[str]) -> Dict[str, str]:
        """What tells `uv` to trust this CA set: the bundle by path, or its system-certificates switch."""
        if self.bundle:
            return {"SSL_CERT_DIR" if os.path.isdir(self.bundle) else "SSL_CERT_FILE": self.bundle}
        return {uv_system_certs_variable(tuple(uv)): "1"} if self.system else {}

    def pip_env(self) -> Dict[str, str]:
        """pip takes the bundle as `--cert`, and the system store too, by the path the decision found: only a pip
        of 24.2 or newer on Python 3.10+ reads the system store by itself (truststore); an older one (a venv seeded
        by an ensurepip before it, Python 3.8 and 3.9) trusts its vendored certifi, and a site CA that only the
        system store holds failed the venv's first pip install while uv and our client passed."""
        if self.bundle:
            return {"PIP_CERT": self.bundle}
        found = system_ca() if self.system else None
        return {"PIP_CERT": found} if found else {}


def decide_trust(network: Mapping[str, str]) -> Trust:
    """The run's trust, from pip's network settings: its `cert` when one is configured, else the system store
    where this host has one."""
    cert = network.get("cert")
    return Trust(bundle=cert) if cert else Trust(system=system_ca() is not None)


def system_ca() -> Optional[str]:
    """The OS trust store as OpenSSL (and so pip on Python 3.8 and 3.9) finds it: SSL_CERT_FILE, SSL_CERT_DIR,
    OpenSSL's compiled-in default file and directory, then the distributions' bundles. None: there is none."""
    paths = ssl.get_default_verify_paths()
    for candidate in (os.environ.get("SSL_CERT_FILE"), paths.cafile, *SYSTEM_BUNDLES):
        if candidate and os.path.isfile(candidate):
            return candidate
    for candidate in (os.environ.get("SSL_CERT_DIR"), paths.capath):
        if candidate and os.path.isdir(candidate) and any(n.endswith((".0", ".pem")) for n in os.listdir(candidate)):
            return candidate
    return None


@lru_cache(maxsize=None)
def uv_system_certs_variable(uv: Tuple[str, ...]) -> str:
    """UV_SYSTEM_CERTS, or UV_NATIVE_TLS for a uv older than 0.11 (or one whose version cannot be read)."""
    out = capture([*uv, "--version"], timeout=30)
    found = re.match(r"uv (\d+)\.(\d+)\.(\d+)", out.stdout.strip()) if out.returncode == 0 else None
    version = tuple(int(n) for n in found.groups()) if found else (0, 0, 0)
    return "UV_SYSTEM_CERTS" if version >= UV_SYSTEM_CERTS_SINCE else "UV_NATIVE_TLS"
