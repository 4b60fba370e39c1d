"""Fix hints that work on the OS at hand. `apt-get install python3.11` fails on Debian 11 and needs the
deadsnakes PPA on Ubuntu 20.04; Ascend hosts often run openEuler, Kylin or EulerOS."""

from __future__ import annotations

from typing import Mapping, Optional

from ascend_setup.utils.osrelease import os_release

PORTABLE = (
    "pyenv install {v} (then --python ~/.pyenv/versions/{v}.*/bin/python{v}), or uv python install {v} "
    "(where its download source cannot be reached, set UV_PYTHON_INSTALL_MIRROR to a mirror of "
    "python-build-standalone)"
)


def python_install_hint(minor: str = "3.11", release: Optional[Mapping[str, str]] = None) -> str:
    """How to get CPython `minor` with venv support on this OS."""
    release = os_release() if release is None else release
    os_id = release.get("ID", "").lower()
    like = release.get("ID_LIKE", "").lower().split()
    version = release.get("VERSION_ID", "")
    portable = PORTABLE.format(v=minor)
    if os_id == "ubuntu":
        native = {"22.04": "3.10", "24.04": "3.12"}.get(version)
        if native == minor:
            return f"sudo apt-get install python{minor} python{minor}-venv"
        return (
            f"sudo add-apt-repository ppa:deadsnakes/ppa && sudo apt-get update && "
            f"sudo apt-get install python{minor} python{minor}-venv (Ubuntu {version}); or {portable}"
        )
    if os_id == "debian" or "debian" in like:
        native = {"11": "3.9", "12": "3.11", "13": "3.13"}.get(version)
        if native == minor:
            return f"sudo apt-get install python{minor} python{minor}-venv"
        return f"Debian {version} ships Python {native or 'another version'}, not {minor}: {portable}"
    if os_id in ("openeuler", "kylin", "euleros", "hce") or "openeuler" in like or "euleros" in like:
        return f"sudo dnf install python{minor} (where the distribution has it, e.g. openEuler 24.03), or {portable}"
    if os_id in ("centos", "rhel", "rocky", "almalinux", "fedora") or "rhel" in like or "fedora" in like:
        return f"sudo dnf install python{minor}, or {portable}"
    return portable
