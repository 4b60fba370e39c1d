"""Write the chosen index where the tools read it: the venv's pip.conf and uv.toml, never the user's.

An existing file is edited, not replaced: only the index keys change (pip.conf: `index-url` and
`extra-index-url`, in `[global]` and in any command section that sets them; uv.toml: the top-level
`index-url`, `extra-index-url`, `index-strategy`). Every other key, section, comment and blank line stays
as it was, byte for byte. A line-preserving edit rather than a configparser round-trip, which drops
comments and reflows values.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ascend_setup.errors import BadInput
from ascend_setup.utils.files import atomic_write_text, make_dir
from ascend_setup.utils.inputs import read_input_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the tool runs on 3.9+; tomli is tomllib's backport
    import tomli as tomllib

MARK = "# written by ascend-setup: this venv's package indexes"
PIP_KEYS = ("index-url", "extra-index-url")
UV_KEYS = ("index-url", "extra-index-url", "index-strategy")
_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*(?:[#;].*)?$")
_TABLE = re.compile(r"^\s*\[")


def pip_conf_text(index_url: str, extra_index_urls: Sequence[str]) -> str:
    return "\n".join([MARK, "[global]", *_pip_lines(index_url, extra_index_urls)]) + "\n"


def _pip_lines(index_url: str, extra_index_urls: Optional[Sequence[str]]) -> List[str]:
    lines = [f"index-url = {index_url}"]
    if extra_index_urls:
        lines.append("extra-index-url =")
        lines += [f"    {url}" for url in extra_index_urls]
    return lines


def uv_toml_text(index_url: str, extra_index_urls: Sequence[str]) -> str:
    lines = [
        "# written by ascend-setup: pass it to uv with --config-file (uv reads no pip.conf)",
        *_uv_lines(index_url, extra_index_urls),
    ]
    return "\n".join(lines) + "\n"


def _uv_lines(index_url: str, extra_index_urls: Optional[Sequence[str]]) -> List[str]:
    lines = [f'index-url = "{index_url}"']
    if extra_index_urls:
        lines.append("extra-index-url = [" + ", ".join(f'"{u}"' for u in extra_index_urls) + "]")
        lines.append('index-strategy = "unsafe-best-match"')
    return lines


def _pip_key(line: str) -> Optional[str]:
    """The normalised key a pip.conf line sets, if it starts one (pip takes `_` for `-`)."""
    match = re.match(r"^([A-Za-z0-9_.-]+)\s*[=:]", line)
    return match.group(1).lower().replace("_", "-") if match else None


def edit_pip_conf(text: str, index_url: str, extra_index_urls: Optional[Sequence[str]]) -> str:
    """`text` with its index keys set; `extra_index_urls=None` keeps the extra indexes it names."""
    lines = text.splitlines(keepends=True)
    out: List[str] = []
    section: Optional[str] = None
    inserted_in: Set[str] = set()
    skipping = False
    keep_extra = extra_index_urls is None
    owned = ("index-url",) if keep_extra else PIP_KEYS
    has_global = False

    def new_block() -> List[str]:
        return [line + "\n" for line in _pip_lines(index_url, None if keep_extra else extra_index_urls)]

    def close(name: Optional[str]) -> None:
        """Leaving a section: [global] gets the keys at its end (before its trailing blank lines) if it had none."""
        if name == "global" and name not in inserted_in:
            end = len(out)
            while end > 0 and not out[end - 1].strip():
                end -= 1
            out[end:end] = new_block()
            inserted_in.add(name)

    for line in lines:
        header = _SECTION.match(line)
        if header:
            skipping = False
            close(section)
            section = header.group(1).strip().lower()
            has_global = has_global or section == "global"
            out.append(line)
            continue
        if skipping and line[:1] in (" ", "\t") and line.strip():
            continue  # a continuation line of a value we replace
        skipping = False
        key = _pip_key(line)
        if section is not None and key in owned:
            skipping = True
            if section not in inserted_in:  # in place of the first; a command section's own index wins
                out += new_block()  # over [global], so it is set there too
                inserted_in.add(section)
            continue
        out.append(line)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    close(section)
    if not has_global:
        out += ["[global]\n"] + new_block()
    return "".join(out)


def edit_uv_toml(text: str, index_url: str, extra_index_urls: Optional[Sequence[str]]) -> str:
    """`text` with its top-level index keys set (TOML puts them before the first table)."""
    keep_extra = extra_index_urls is None
    owned = ("index-url",) if keep_extra else UV_KEYS
    lines = text.splitlines(keepends=True)
    out: List[str] = []
    depth = 0
    at: Optional[int] = None
    top = True
    for line in lines:
        if depth > 0:  # inside a multi-line array we drop
            depth += line.count("[") - line.count("]")
            continue
        if top and _TABLE.match(line):
            top = False
            if at is None:
                at = len(out)
        match = re.match(r"^\s*([A-Za-z0-9_-]+)\s*=", line) if top else None
        if match and match.group(1) in owned:
            if at is None:
                at = len(out)
            value = line.split("=", 1)[1]
            depth = value.count("[") - value.count("]")
            continue
        out.append(line)
    if at is None:
        at = len(out)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
    new = [line + "\n" for line in _uv_lines(index_url, None if keep_extra else extra_index_urls)]
    return "".join(out[:at] + new + out[at:])


def venv_config_files(venv: Path) -> Tuple[Path, Path]:
    return venv / "pip.conf", venv / "uv.toml"


def _existing(path: Path) -> Optional[str]:
    """The file's text if there is one (checked like every input; a link is not ours to edit)."""
    if not path.exists() and not path.is_symlink():
        return None
    return read_input_text(path, "pip-config", follow=False)


def write_venv_config(venv: Path, index_url: str, extra_index_urls: Optional[Sequence[str]]) -> None:
    """pip reads `<venv>/pip.conf` (its site config) for that venv only; uv reads uv.toml when told to.
    A new file is written whole; an existing one is edited (see the module doc). `extra_index_urls=None`
    changes the primary index only (`mirrors --apply`)."""
    pip_conf, uv_toml = venv_config_files(venv)
    old_pip, old_uv = _existing(pip_conf), _existing(uv_toml)
    if old_uv is not None:
        _parse_toml(old_uv, uv_toml)  # a file we cannot read as TOML is not edited blind
    new_pip = (
        pip_conf_text(index_url, extra_index_urls or [])
        if old_pip is None
        else edit_pip_conf(old_pip, index_url, extra_index_urls)
    )
    new_uv = (
        uv_toml_text(index_url, extra_index_urls or [])
        if old_uv is None
        else edit_uv_toml(old_uv, index_url, extra_index_urls)
    )
    _parse_ini(new_pip, pip_conf)
    _parse_toml(new_uv, uv_toml)
    if new_pip != old_pip:
        atomic_write_text(pip_conf, new_pip)
    if new_uv != old_uv:
        atomic_write_text(uv_toml, new_uv)


def user_pip_conf() -> Path:
    """The file `pip config --user` edits: of ~/.pip/pip.conf (legacy) and $XDG_CONFIG_HOME/pip/pip.conf, the
    last that exists, else the XDG one."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf"
    existing = [p for p in (home / ".pip" / "pip.conf", xdg) if p.exists()]
    return existing[-1] if existing else xdg


def write_user_config(index_url: str) -> Path:
    """--global: the user's own pip.conf gets this index-url; everything else in it stays as it was."""
    path = user_pip_conf()
    old = _existing(path)
    new = pip_conf_text(index_url, []) if old is None else edit_pip_conf(old, index_url, None)
    _parse_ini(new, path)
    if new != old:
        make_dir(path.parent)
        atomic_write_text(path, new)
    return path


def _parse_ini(text: str, path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        raise BadInput(
            f"{path} is not a pip configuration pip can read ({str(exc).splitlines()[0]}); it was not changed",
            hint=f"fix or move away {path}",
        ) from None
    return parser


def _parse_toml(text: str, path: Path) -> Dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(
            f"{path} is not valid TOML ({exc}); it was not changed", hint=f"fix or move away {path}"
        ) from None


def venv_config_matches(venv: Path, index_url: str, extra_index_urls: Sequence[str]) -> bool:
    """Whether the venv's pip.conf and uv.toml name these indexes (whatever else they hold)."""
    pip_conf, uv_toml = venv_config_files(venv)
    try:
        pip = _parse_ini(_existing(pip_conf) or "", pip_conf)
        uv = _parse_toml(_existing(uv_toml) or "", uv_toml)
    except BadInput:
        return False
    extras = pip.get("global", "extra-index-url", fallback="").split()
    return (
        pip.get("global", "index-url", fallback=None) == index_url
        and extras == list(extra_index_urls)
        and uv.get("index-url") == index_url
        and list(uv.get("extra-index-url", [])) == list(extra_index_urls)
    )
