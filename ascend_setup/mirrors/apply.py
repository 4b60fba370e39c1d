"""Write the chosen index where the tools read it: the venv's pip.conf and uv.toml, never the user's."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ascend_setup.fsutil import atomic_write_text


def pip_conf_text(index_url: str, extra_index_urls: Sequence[str]) -> str:
    lines = ["# written by ascend-setup: this venv's package indexes", "[global]", f"index-url = {index_url}"]
    if extra_index_urls:
        lines.append("extra-index-url =")
        lines += [f"    {url}" for url in extra_index_urls]
    return "\n".join(lines) + "\n"


def uv_toml_text(index_url: str, extra_index_urls: Sequence[str]) -> str:
    lines = ["# written by ascend-setup: pass it to uv with --config-file (uv reads no pip.conf)",
             f'index-url = "{index_url}"']
    if extra_index_urls:
        lines.append("extra-index-url = [" + ", ".join(f'"{u}"' for u in extra_index_urls) + "]")
        lines.append('index-strategy = "unsafe-best-match"')
    return "\n".join(lines) + "\n"


def venv_config_files(venv: Path) -> tuple:
    return venv / "pip.conf", venv / "uv.toml"


def write_venv_config(venv: Path, index_url: str, extra_index_urls: Sequence[str]) -> None:
    """pip reads `<venv>/pip.conf` (its site config) for that venv only."""
    pip_conf, uv_toml = venv_config_files(venv)
    atomic_write_text(pip_conf, pip_conf_text(index_url, extra_index_urls))
    atomic_write_text(uv_toml, uv_toml_text(index_url, extra_index_urls))


def venv_config_matches(venv: Path, index_url: str, extra_index_urls: Sequence[str]) -> bool:
    pip_conf, uv_toml = venv_config_files(venv)
    try:
        return pip_conf.read_text() == pip_conf_text(index_url, extra_index_urls) and \
            uv_toml.read_text() == uv_toml_text(index_url, extra_index_urls)
    except OSError:
        return False
