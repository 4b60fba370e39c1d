"""What `hccn_tool` prints, read as facts. The formats are the driver's own (hicann/driver,
src/custom/network/hccn/ascend910B: tool_ops.c, tool_ops_ext.c, cmd.c, ds_net_ext.c), with the drift between
releases: `Socket failed` (older) and `Socket fail` (current); `packet loss` (RoCE ping) and `packets loss`
(HCCS ping). Every parser takes text and returns a value or None: an unreadable answer is a fact too."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

#: `-net_health -g`'s answers (tool_ops.c L36-47); only Success is healthy.
HEALTHY = "Success"
#: An answer that is no fact about the card but about the tool (cmd.c L794-797, L674).
TOOL_ERRORS = ("permission denied", "hccn_tool is busy", "command not found", "No such file")
_LINK = re.compile(r"link status\s*:\s*(\w+)", re.I)
_HEALTH = re.compile(r"net health status\s*:\s*([A-Za-z][A-Za-z ]*[A-Za-z])", re.I)
_IP = re.compile(r"^\s*ipaddr\s*:\s*(\d{1,3}(?:\.\d{1,3}){3})\s*$", re.M)
_MASK = re.compile(r"^\s*netmask\s*:\s*(\d{1,3}(?:\.\d{1,3}){3})\s*$", re.M)
_NO_IP = re.compile(r"no ip was preset", re.I)
_LOSS = re.compile(r"(\d+)\s+packets? transmitted,\s*(\d+)\s+received,\s*([\d.]+)%\s+packets?\s+loss", re.I)
_PING_FAIL = re.compile(r"recv time out seq|Destination Host Unreachable|Message too long", re.I)


def link_status(text: str) -> Optional[str]:
    """`link status: UP` -> 'UP' (DOWN, or what a newer driver prints), None when there is no such line."""
    m = _LINK.search(text)
    return m.group(1).upper() if m else None


def net_health(text: str) -> Optional[str]:
    """`net health status: Socket fail` -> 'Socket fail'; the older `Socket failed` is read as the same."""
    m = _HEALTH.search(text)
    if not m:
        return None
    value = m.group(1).strip()
    return "Socket fail" if value.lower() == "socket failed" else value


@dataclass(frozen=True)
class DeviceIp:
    address: Optional[str]
    netmask: Optional[str]
    error: Optional[str] = None  # why there is no address (the tool's words)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def device_ip(text: str) -> DeviceIp:
    """`ipaddr:10.x.x.10` / `netmask:255.255.255.0`, or the tool's `Get ipconf failed, because no ip was preset
    there!`."""
    ip, mask = _IP.search(text), _MASK.search(text)
    if ip:
        return DeviceIp(ip.group(1), mask.group(1) if mask else None)
    if _NO_IP.search(text):
        return DeviceIp(None, None, "no IP was preset on this NPU")
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return DeviceIp(None, None, line or "hccn_tool printed no address")


@dataclass(frozen=True)
class PingResult:
    ok: bool
    transmitted: Optional[int]
    received: Optional[int]
    detail: str

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def ping_result(text: str, returncode: int) -> PingResult:
    """`-ping -g address IP`: ok when the tool exits 0, the summary says 0% loss, and no failure marker shows.
    A partial loss is a failure (a flapping link loses HCCL's packets too)."""
    m = _LOSS.search(text)
    sent, got = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    failed = _PING_FAIL.search(text)
    ok = returncode == 0 and m is not None and float(m.group(3)) == 0.0 and sent != 0 and failed is None
    if ok:
        detail = f"{got}/{sent} received"
    elif failed:
        detail = failed.group(0)
    elif m:
        detail = f"{got}/{sent} received, {m.group(3)}% loss"
    else:
        detail = tool_error(text) or next(
            (x.strip() for x in reversed(text.splitlines()) if x.strip()), f"hccn_tool exited {returncode}"
        )
    return PingResult(ok, sent, got, detail)


def tool_error(text: str) -> Optional[str]:
    """The tool's own failure (not the card's): the line saying it, else None."""
    for line in text.splitlines():
        if any(e.lower() in line.lower() for e in TOOL_ERRORS):
            return line.strip()
    return None
