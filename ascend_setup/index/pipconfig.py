"""The user's pip configuration, read once by asking pip itself: the index it points at, the network
settings we keep, and everything else, which the tool's pip and uv runs ignore on purpose.

A global `constraint`, `find-links` or a dead `extra-index-url` in someone's pip.conf silently took
part in our resolutions (and a constraint caused a conflict). So our subprocesses run with
PIP_CONFIG_FILE=/dev/null (pip then loads no configuration file at all) and no PIP_*/UV_* variables,
and get back only the network settings: cert, client-cert, proxy, trusted-host, timeout.
`--respect-pip-config` keeps everything, for the rare site that needs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.index.pipanswer import memo_key, recall, remember, stats
from ascend_setup.index.trust import decide_trust
from ascend_setup.index.urls import is_index_url

#: pip option -> the variable that carries it to pip (and, for uv, its own equivalent).
NETWORK_KEYS = ("cert", "client-cert", "proxy", "trusted-host", "timeout")
#: Options that change nothing about what gets installed or from where.
HARMLESS_KEYS = {
    "disable-pip-version-check",
    "no-input",
    "progress-bar",
    "no-color",
    "quiet",
    "verbose",
    "root-user-action",
    "cache-dir",
    "no-cache-dir",
    "log",
    "user-agent",
    "retries",
    "default-timeout",
    "keyring-provider",
    "break-system-packages",
    "config-file",
}
#: Our own bounds for every pip run (the gate has already shown that each index answers).
PIP_RETRIES = "2"
DEFAULT_TIMEOUT = "30"

_ASK = (
    "import json, os\n"
    "from pip._internal.configuration import Configuration\n"
    "from pip._internal.models.index import PyPI\n"
    "c = Configuration(isolated=False); c.load()\n"
    "files = [f for _, fs in c.iter_config_files() for f in fs if f != os.devnull and os.path.exists(f)]\n"
    "print(json.dumps({'items': dict(c.items()), 'default': PyPI.simple_url, 'files': files}))\n"
)


@dataclass(frozen=True)
class PipSettings:
    """What the user's pip configuration says, split into what we keep and what we ignore."""

    default_index: str
    index_url: Optional[str] = None
    network: Mapping[str, str] = field(default_factory=dict)
    ignored: Mapping[str, str] = field(default_factory=dict)  # "global.constraint (file)" -> value
    files: Tuple[str, ...] = ()
    respect: bool = False

    @property
    def index(self) -> str:
        """The index pip is configured with, else pip's own default."""
        return self.index_url or self.default_index

    def kept(self, respect: bool) -> PipSettings:
        return PipSettings(self.default_index, self.index_url, self.network, self.ignored, self.files, respect)

    def describe_ignored(self) -> List[str]:
        return [f"{key} = {value}" for key, value in self.ignored.items()]

    def pip_env(self, base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        """The environment of a pip run: no configuration files, no PIP_* but the network settings."""
        env = dict(os.environ if base is None else base)
        if self.respect:
            return env
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
        for key, value in self.network.items():
            if key != "cert":  # the trust decision's, below
                env["PIP_" + key.upper().replace("-", "_")] = value
        env.update(decide_trust(self.network).pip_env())
        env.setdefault("PIP_TIMEOUT", DEFAULT_TIMEOUT)
        env["PIP_RETRIES"] = PIP_RETRIES
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        return env

    def uv_env(self, uv: Sequence[str], base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        """The environment of a run of `uv`: no uv.toml, no UV_* settings, never an interpreter download,
        and pip's network settings (the trust decision among them) in this uv's own terms."""
        env = dict(os.environ if base is None else base)
        if not self.respect:
            env = {k: v for k, v in env.items() if not k.startswith("UV_")}
            env["UV_NO_CONFIG"] = "1"
        env["UV_PYTHON_DOWNLOADS"] = "never"
        net = self.network
        env.update(decide_trust(net).uv_env(uv))
        if net.get("client-cert"):
            env["SSL_CLIENT_CERT"] = net["client-cert"]
        if net.get("proxy"):
            for var in ("HTTP_PROXY", "HTTPS_PROXY"):
                env.setdefault(var, net["proxy"])
        if net.get("trusted-host"):
            env["UV_INSECURE_HOST"] = net["trusted-host"]
        env["UV_HTTP_TIMEOUT"] = net.get("timeout", DEFAULT_TIMEOUT)
        env.setdefault("UV_HTTP_RETRIES", PIP_RETRIES)
        return env


def _flatten(items: Mapping[str, object]) -> List[Tuple[str, str, Optional[str]]]:
    """(section.key, value, the file it came from) from pip's configuration items. pip up to 25 gives
    `section.key -> value`; pip 26 gives `file (or ':env:') -> {section.key: value}`."""
    flat: List[Tuple[str, str, Optional[str]]] = []
    for name, value in items.items():
        if isinstance(value, dict):
            origin = None if name == ":env:" else name
            flat += [(str(k), str(v), origin) for k, v in value.items()]
        else:
            flat.append((name, str(value), None))
    return flat


def _classify(items: Mapping[str, object]) -> Tuple[Optional[str], Dict[str, str], Dict[str, str]]:
    """(index-url, network settings, ignored settings). Environment variables (section ':env:') beat
    files, as in pip."""
    index_url: Optional[str] = None
    network: Dict[str, str] = {}
    ignored: Dict[str, str] = {}
    for dotted, value, origin in sorted(_flatten(items), key=lambda item: item[0].startswith(":env:")):
        section, _, key = dotted.partition(".")
        source = "PIP_" + key.upper().replace("-", "_") if section == ":env:" else f"{section}.{key}"
        key = "timeout" if key == "default-timeout" else key
        if section not in (":env:", "global", "install", "download", "wheel"):
            continue
        if key == "index-url":
            index_url = value.split()[0] if value.split() else None
            if index_url is not None and not is_index_url(index_url):
                where = source + (f" (in {origin})" if origin else "")
                raise BadInput(
                    f"{where}={index_url!r} is not an http(s):// or file:// URL",
                    hint=f"fix or unset {source}, or pass --index-url URL",
                )
        elif key in NETWORK_KEYS:
            network[key] = " ".join(value.split())
            _check_network_value(key, network[key], source + (f" (in {origin})" if origin else ""))
        elif key not in HARMLESS_KEYS:
            ignored[source] = " ".join(value.split()) + (f" (in {origin})" if origin else "")
    return index_url, network, ignored


def _check_network_value(key: str, value: str, source: str) -> None:
    """A setting pip would choke on is named as such: a bad timeout once surfaced as "uv found no installable
    set of versions"."""
    if key == "timeout":
        try:
            ok = float(value) > 0
        except ValueError:
            ok = False
        if not ok:
            raise BadInput(
                f"{source}={value!r} is not a timeout (a positive number of seconds)", hint=f"fix or unset {source}"
            )


def _ask_pip_here() -> Optional[Dict[str, Any]]:
    """The same answer from this interpreter's own pip, without starting another interpreter; remembered
    between runs (`pipanswer`) for as long as nothing pip reads has changed."""
    key = memo_key()
    if key is None:
        return None  # no pip here
    remembered = recall(key)
    if remembered is not None:
        return remembered
    try:
        from pip._internal.configuration import Configuration
        from pip._internal.models.index import PyPI
    except ImportError:
        return None
    seen = _considered()  # before pip reads them: a file changed while it reads is seen as changed next time
    try:
        config = Configuration(isolated=False)
        config.load()
        files = [f for _, fs in config.iter_config_files() for f in fs if f != os.devnull and os.path.exists(f)]
        answer: Dict[str, Any] = json.loads(
            json.dumps({"items": dict(config.items()), "default": PyPI.simple_url, "files": files}, default=str)
        )
    except Exception:  # pip's internals moved: ask it the documented way below
        return None
    if seen is not None:
        remember(key, seen, answer)
    return answer


def _considered() -> Optional[Dict[str, Optional[List[int]]]]:
    """Every file this pip would consider, present or not, whichever variables say which it loads, with its
    stat; None where pip does not say (then its answer is not remembered)."""
    try:
        from pip._internal.configuration import get_configuration_files

        files = [f for fs in get_configuration_files().values() for f in fs]
    except Exception:
        return None
    config_file = os.environ.get("PIP_CONFIG_FILE")
    return stats([*([config_file] if config_file else []), *files])


@lru_cache(maxsize=None)
def _ask_pip(python: str, env_key: Tuple[Tuple[str, str], ...]) -> Optional[Dict[str, Any]]:
    if python == sys.executable:
        here = _ask_pip_here()
        if here is not None:
            return here
    try:
        out = subprocess.run(
            [python, "-I", "-c", _ASK],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env=dict(env_key),
            stdin=subprocess.DEVNULL,
        ).stdout
        answer: Dict[str, Any] = json.loads(out.strip().splitlines()[-1])  # the same document, as _ASK prints it
        return answer
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def pip_settings(python: Optional[str] = None, *, respect: bool = False) -> PipSettings:
    """The user's pip configuration as pip itself reads it (files and PIP_* variables)."""
    data = _ask_pip(python or sys.executable, tuple(sorted(os.environ.items())))
    if data is None:
        raise AscendSetupError(
            "cannot ask pip for its configuration (pip is not importable)",
            hint="pass --index-url URL, or install pip for this interpreter",
        )
    index_url, network, ignored = _classify(data["items"])
    return PipSettings(
        default_index=data["default"],
        index_url=index_url,
        network=network,
        ignored=ignored,
        files=tuple(data["files"]),
        respect=respect,
    )


def network_settings_for_this_run(settings: PipSettings) -> PipSettings:
    """Make the tool's own HTTP trust what pip and uv are given (decide_trust); returns `settings`."""
    from ascend_setup.index.http import use_trust

    use_trust(decide_trust(settings.network))
    return settings


def trust_for_this_run() -> None:
    """The same decision for a command that runs neither pip nor uv (mirrors, fit and model fetch on a hub id):
    its HTTP, ours and huggingface_hub's, trusts pip's configured cert as install does. Where pip cannot be asked
    (no pip, a pip.conf it refuses), the system store: such a command never needed pip before."""
    try:
        network_settings_for_this_run(pip_settings())
    except AscendSetupError:
        pass


def configured_index(python: Optional[str] = None) -> str:
    """PIP_INDEX_URL, else pip.conf's index-url, else pip's built-in default (asked of pip itself)."""
    return pip_settings(python).index
