"""Fixes that fit the host: the package command of this OS, the advice for this device.

A fix that says 'install the devel headers' helps nobody at 2 a.m.; `sudo apt-get install ...` on Ubuntu and
`sudo yum install ...` on openEuler/Kylin does. The same cause can also need another fix on an A2 and an A3
(the SOC to build for, the wheel that matches). When the host or the device is not known, both are shown.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from ascend_setup.utils.osrelease import os_release

#: SOC names as setup.py and npu-smi spell them: A2 is ascend910b*, A3 is ascend910_93*, 310P ascend310p*.
_SOC_DEVICE = (
    (re.compile(r"ascend910b", re.I), "A2"),
    (re.compile(r"ascend910_93", re.I), "A3"),
    (re.compile(r"ascend310p", re.I), "310P"),
    (re.compile(r"ascend950", re.I), "A5"),
)
DEFAULT_SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"


def device_of(soc: str) -> Optional[str]:
    """'A2', 'A3', '310P' or 'A5' for a SOC_VERSION-like name."""
    for pattern, device in _SOC_DEVICE:
        if pattern.search(soc):
            return device
    return None


def os_family(release: Mapping[str, str]) -> Optional[str]:
    """'apt' (Debian, Ubuntu) or 'yum' (openEuler, Kylin, EulerOS, CentOS...): how packages are installed."""
    words = [release.get("ID", "").lower(), *release.get("ID_LIKE", "").lower().split()]
    if any(w in ("debian", "ubuntu") for w in words):
        return "apt"
    if any(
        w in ("openeuler", "kylin", "euleros", "hce", "centos", "rhel", "fedora", "rocky", "almalinux") for w in words
    ):
        return "yum"
    return None


@dataclass(frozen=True)
class Host:
    """What a fix depends on. Unknown fields make the fix name every variant."""

    family: Optional[str] = None  # 'apt' or 'yum'
    device: Optional[str] = None  # 'A2', 'A3', '310P', 'A5'
    set_env: str = DEFAULT_SET_ENV

    @classmethod
    def detect(cls, soc: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Host:
        """This machine: its OS from os-release, its device from `soc` (or SOC_VERSION), its CANN's set_env.sh
        from ASCEND_TOOLKIT_HOME/ASCEND_HOME_PATH when one is sourced."""
        env = os.environ if env is None else env
        soc = soc or env.get("SOC_VERSION", "")
        home = env.get("ASCEND_TOOLKIT_HOME") or env.get("ASCEND_HOME_PATH")
        set_env = DEFAULT_SET_ENV
        if home:
            for candidate in (os.path.join(home, "set_env.sh"), os.path.join(os.path.dirname(home), "set_env.sh")):
                if os.path.isfile(candidate):
                    set_env = candidate
                    break
        return cls(os_family(os_release()), device_of(soc) if soc else None, set_env)


@dataclass(frozen=True)
class Fix:
    """`text` applies everywhere; `apt`/`yum` are the packages to install on that OS family; `a2`/`a3` is
    what differs by device. `{0}`, `{1}` are the signature's captured groups, `{set_env}` the host's script."""

    text: str
    apt: str = ""
    yum: str = ""
    a2: str = ""
    a3: str = ""

    def for_host(self, host: Host, groups: Sequence[str] = ()) -> str:
        parts = [self.text] if self.text else []
        commands = {
            "apt": f"sudo apt-get install -y {self.apt}" if self.apt else "",
            "yum": f"sudo yum install -y {self.yum}" if self.yum else "",
        }
        if host.family is not None and commands.get(host.family):
            parts.append(commands[host.family])
        elif any(commands.values()):
            parts.append(
                "; ".join(
                    f"{c} ({'Ubuntu/Debian' if f == 'apt' else 'openEuler/Kylin'})" for f, c in commands.items() if c
                )
            )
        by_device = {"A2": self.a2, "A3": self.a3}
        if host.device is not None and by_device.get(host.device):
            parts.append(by_device[host.device])
        elif self.a2 or self.a3:
            parts.append("; ".join(f"on {d}: {t}" for d, t in by_device.items() if t))
        return "; ".join(parts).format(*groups, set_env=host.set_env)
