"""Refuse what the installed vllm-ascend would silently ignore: 0.23.0 drops unknown `--additional-config` keys
and sub-keys without a word, and several `VLLM_ASCEND_*` variables quoted online are read nowhere. So a stale
key, a typo or a moved switch does nothing, and the user measures the wrong thing. Checked before any start,
for the composed command and for the user's own arguments after `--` and environment alike.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Iterable, List, Mapping, Optional

from ascend_setup.errors import BadInput
from ascend_setup.serve.families import Retired, load_table
from ascend_setup.serve.keys import KeySet, all_names

ADDITIONAL_CONFIG = "--additional-config"
PREFIX = "VLLM_ASCEND_"


def _retired(name: str) -> Optional[Retired]:
    return next((r for r in load_table().retired if r.key == name), None)


def shown(name: str) -> str:
    """A key from the user's JSON as a message may show it: control characters escaped."""
    return name if name.isprintable() else ascii(name)[1:-1]


def _unknown(name: str, where: str, keys: KeySet) -> str:
    """One problem: the name, the installed version, and the replacement (retired table, else a close match)."""
    text = f"{where} {shown(name)} is not read by the installed vllm-ascend {keys.version}"
    retired = _retired(name.split(".")[-1]) or _retired(name)
    if retired:
        return f"{text} (removed in {retired.removed}); replacement: {retired.replacement}"
    close = difflib.get_close_matches(
        name.split(".")[-1], [n.split(".")[-1] for n in all_names(keys)], n=1, cutoff=0.75
    )
    if close:
        full = next(n for n in all_names(keys) if n.split(".")[-1] == close[0])
        return f"{text}; did you mean {full}?"
    return text + "; drop it"


#: JSON values each type the source shows accepts (bool is an int to Python, not to a switch).
ACCEPTS = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,)}


def _wrong_type(name: str, value: Any, keys: KeySet) -> Optional[str]:
    kind = keys.types.get(name)
    if kind is None or (isinstance(value, ACCEPTS[kind]) and not (kind != "bool" and isinstance(value, bool))):
        return None
    why = f" (bool({json.dumps(value)}) is {bool(value)})" if kind == "bool" else ""
    return (
        f"{ADDITIONAL_CONFIG} key {shown(name)} is {shown(json.dumps(value))[:60]}, but vllm-ascend "
        f"{keys.version} reads it as a {kind}{why}: give a JSON {'true or false' if kind == 'bool' else kind}"
    )


def config_problems(config: Mapping[str, Any], keys: KeySet) -> List[str]:
    """Every unknown, removed or wrongly typed key and sub-key of the `--additional-config` object."""
    found = []
    for key, value in config.items():
        if key in keys.removed:
            found.append(
                f"{ADDITIONAL_CONFIG} key {shown(key)} was removed from vllm-ascend {keys.version}: {keys.removed[key]}"
            )
        elif key not in keys.keys and key not in keys.deprecated:
            found.append(_unknown(key, f"{ADDITIONAL_CONFIG} key", keys))
        elif isinstance(value, dict) and key in keys.sub_keys:
            for sub, sub_value in value.items():
                if sub not in keys.sub_keys[key]:
                    found.append(_unknown(f"{key}.{sub}", f"{ADDITIONAL_CONFIG} key", keys))
                else:
                    found += filter(None, [_wrong_type(f"{key}.{sub}", sub_value, keys)])
        else:
            found += filter(None, [_wrong_type(key, value, keys)])
    return found


def config_warnings(config: Mapping[str, Any], keys: KeySet) -> List[str]:
    """Keys the plugin still honours but says are deprecated."""
    return [
        f"{ADDITIONAL_CONFIG} key {shown(k)} is deprecated in vllm-ascend {keys.version}: {keys.deprecated[k]}"
        for k in config
        if k in keys.deprecated
    ]


def env_problems(names: Iterable[str], keys: KeySet, where: str = "variable") -> List[str]:
    """Every VLLM_ASCEND_* variable the plugin reads nowhere."""
    return [
        _unknown(n, where, keys)
        for n in sorted(set(names))
        if n.startswith(PREFIX) and n not in keys.env and n not in keys.deprecated_env
    ]


def env_warnings(names: Iterable[str], keys: KeySet, where: str = "variable") -> List[str]:
    """Variables still honoured, as a fallback vllm-ascend logs as deprecated (0.23.0's own tutorial sets
    VLLM_ASCEND_ENABLE_MLAPO): said, not refused."""
    return [
        f"{where} {n} is deprecated in vllm-ascend {keys.version} (still honoured, as a fallback it says will "
        f"be removed); replacement: {ADDITIONAL_CONFIG} '{{\"{keys.deprecated_env[n]}\": ...}}'"
        for n in sorted(set(names))
        if n in keys.deprecated_env
    ]


def check_against(
    keys: KeySet, *, config: Mapping[str, Any], env: Mapping[str, str], user_env: Mapping[str, str]
) -> List[str]:
    """BadInput naming every problem at once: the `additional_config` vLLM will read from the command (parsed as
    vLLM parses it, whatever spelling set it), its environment, and the caller's own VLLM_ASCEND_* variables (the
    server inherits them). Returns the warnings: what is deprecated but still honoured."""
    ours = [n for n in env if n.startswith(PREFIX) or n in keys.deprecated_env]
    theirs = [n for n in user_env if (n.startswith(PREFIX) or n in keys.deprecated_env) and n not in env]
    found = (
        config_problems(config, keys)
        + env_problems(ours, keys)
        + env_problems(theirs, keys, where="your environment's")
    )
    if found:
        raise BadInput(
            "; ".join(found), hint="vllm-ascend ignores what it does not read without a word; fix or drop each one"
        )
    return (
        config_warnings(config, keys)
        + env_warnings(ours, keys)
        + env_warnings(theirs, keys, where="your environment's")
    )
