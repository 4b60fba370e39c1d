"""Refuse what the installed vllm-ascend would silently ignore: 0.23.0 drops unknown `--additional-config` keys
and sub-keys without a word, and several `VLLM_ASCEND_*` variables quoted online are read nowhere. So a stale
key, a typo or a moved switch does nothing, and the user measures the wrong thing. Checked before any start,
for the composed command and for the user's own arguments after `--` and environment alike.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, List, Mapping, Optional

from ascend_setup.errors import BadInput
from ascend_setup.serve.families import Retired, load_table
from ascend_setup.serve.keys import KeySet, all_names

ADDITIONAL_CONFIG = "--additional-config"
PREFIX = "VLLM_ASCEND_"


def _retired(name: str) -> Optional[Retired]:
    return next((r for r in load_table().retired if r.key == name), None)


def _unknown(name: str, where: str, keys: KeySet) -> str:
    """One problem: the name, the installed version, and the replacement (retired table, else a close match)."""
    text = f"{where} {name} is not read by the installed vllm-ascend {keys.version}"
    retired = _retired(name.split(".")[-1]) or _retired(name)
    if retired:
        return f"{text} (removed in {retired.removed}); replacement: {retired.replacement}"
    close = difflib.get_close_matches(name.split(".")[-1], [n.split(".")[-1] for n in all_names(keys)], n=1,
                                      cutoff=0.75)
    if close:
        full = next(n for n in all_names(keys) if n.split(".")[-1] == close[0])
        return f"{text}; did you mean {full}?"
    return text + "; drop it"


def config_problems(config: Mapping[str, Any], keys: KeySet) -> List[str]:
    """Every unknown key and sub-key of one `--additional-config` object."""
    found = []
    for key, value in config.items():
        if key not in keys.keys:
            found.append(_unknown(key, f"{ADDITIONAL_CONFIG} key", keys))
        elif isinstance(value, dict) and key in keys.sub_keys:
            found += [_unknown(f"{key}.{sub}", f"{ADDITIONAL_CONFIG} key", keys)
                      for sub in value if sub not in keys.sub_keys[key]]
    return found


def env_problems(names: Iterable[str], keys: KeySet, where: str = "variable") -> List[str]:
    """Every VLLM_ASCEND_* variable the plugin does not read, or reads only as a deprecated fallback."""
    found = []
    for name in sorted(set(names)):
        if name in keys.deprecated_env:
            found.append(f"{where} {name} is deprecated in vllm-ascend {keys.version} (read only as a fallback, "
                         f"to be removed); replacement: {ADDITIONAL_CONFIG} '{{\"{keys.deprecated_env[name]}\": ...}}'")
        elif name.startswith(PREFIX) and name not in keys.env:
            found.append(_unknown(name, where, keys))
    return found


def check_against(keys: KeySet, *, config: Mapping[str, Any], env: Mapping[str, str],
                  user_env: Mapping[str, str]) -> None:
    """BadInput naming every problem at once: the `additional_config` vLLM will read from the command (parsed as
    vLLM parses it, whatever spelling set it), its environment, and the caller's own VLLM_ASCEND_* variables (the
    server inherits them)."""
    found: List[str] = config_problems(config, keys)
    found += env_problems((n for n in env if n.startswith(PREFIX) or n in keys.deprecated_env), keys)
    found += env_problems((n for n in user_env if n.startswith(PREFIX) and n not in env), keys,
                          where="your environment's")
    if found:
        raise BadInput("; ".join(found), hint="vllm-ascend ignores what it does not read without a word; "
                                              "fix or drop each one")
