"""What a flag's value must be, checked while the command line is parsed (each is a flag's `type=` in
`cli/flags.py`): index URLs, `NAME=URL` overrides, SOC_VERSIONs and device types, the mirror, http(s) URLs.

Each raises BadInput with the flag's name, which argparse lets through to the front door's one line (exit 2).
An empty value is let through untouched: the front door refuses it after parsing, in its own words."""

from __future__ import annotations

from typing import Callable, Optional, Tuple
from urllib.parse import urlparse

from ascend_setup.errors import BadInput

#: `--mirror`'s two words: rank the known mirrors, or use pip's index as it is.
MIRROR_WORDS = ("auto", "none")


def check_index_url(url: str, flag: str) -> str:
    """An index URL must be http(s) or file; anything else is bad input now, not a pip error later."""
    from ascend_setup.index.urls import is_index_url

    if not is_index_url(url):
        raise BadInput(f"{flag} {url!r} is not an http(s):// or file:// URL")
    return url.rstrip("/") + "/" if urlparse(url).scheme != "file" else url


def index_url(flag: str) -> Callable[[str], str]:
    """The type of an index URL flag (`--index-url`, `--extra-index-url`, `--tool-index-url`)."""

    def parse(text: str) -> str:
        return check_index_url(text, flag) if text.strip() else text

    return parse


def mirror(text: str) -> str:
    """`--mirror auto|none|URL`."""
    return text if text in MIRROR_WORDS or not text.strip() else check_index_url(text, "--mirror")


def index_override(text: str) -> str:
    """`--index NAME=URL`: the name stripped, the URL checked; kept as NAME=URL (`index.urls.index_overrides`
    makes them one mapping)."""
    if not text.strip():
        return text
    name, sep, url = text.partition("=")
    if not sep or not name.strip() or not url.strip():
        raise BadInput(f"--index {text!r} is not NAME=URL (e.g. --index ascend=https://my.mirror/simple)")
    return f"{name.strip()}={check_index_url(url.strip(), f'--index {name.strip()}=')}"


def http_url(flag: str, hint: str) -> Callable[[str], str]:
    """The type of a flag whose URL the tool downloads from itself (`--build-deps-url`, `--python-mirror`)."""

    def parse(text: str) -> str:
        parsed = urlparse(text)
        if text.strip() and (parsed.scheme not in ("http", "https") or not parsed.netloc):
            raise BadInput(f"{flag} {text!r} is not an http(s):// URL", hint=hint)
        return text

    return parse


def _soc_examples() -> str:
    from ascend_setup.matrix.soc import soc_table

    return ", ".join(f"{d.example} ({d.cards})" for d in soc_table().devices.values())


def soc_version(text: str) -> str:
    """`--soc` as the build takes it (lower case): a SOC_VERSION vllm-ascend's build accepts."""
    from ascend_setup.matrix.soc import device_of

    if not text.strip():
        return text
    if device_of(text) is None:
        raise BadInput(f"--soc {text!r} is not a SOC_VERSION vllm-ascend knows; e.g. {_soc_examples()}")
    return text.strip().lower()


def device(text: str) -> str:
    """`plan --soc`: a device type (A2, A3, 310P, A5) or a SOC_VERSION -> the device type it builds for."""
    from ascend_setup.matrix.soc import device_of, label, parse_device, soc_table

    if not text.strip():
        return text
    found = parse_device(text) or device_of(text)
    if found is None:
        raise BadInput(
            f"--soc {text!r} is neither a device type ({', '.join(label(d) for d in soc_table().devices)})"
            f" nor a SOC_VERSION vllm-ascend knows; e.g. {_soc_examples()}"
        )
    return found


def npus(text: str) -> Tuple[str, Optional[str]]:
    """`bundle --soc`: (device type, SOC_VERSION or None): a device type (A2) or one SOC_VERSION (ascend910b3)."""
    from ascend_setup.matrix.soc import device_of

    if not text.strip():  # a tuple is not a string: the front door's check of empty values would miss it
        raise BadInput("--soc was given an empty value", hint="see ascend-setup --help")
    found = device_of(text)
    if found is not None and text.strip().lower().startswith("ascend"):
        return found, soc_version(text)
    return device(text), None
