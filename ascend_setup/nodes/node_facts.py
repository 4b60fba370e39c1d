"""One node's facts, gathered on the node (`ascend-setup doctor --node-facts --json`) and read back by the
controller through a bounded model: the versions (CANN, driver, row, this tool), the NICs and their IPv4
addresses, the variables a multi-node run reads, the TCP ports already listened on, the clock, and each NPU's
RoCE link, IP, health and TLS switch as hccn_tool reports them."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from typing_extensions import Annotated

from ascend_setup import __version__
from ascend_setup.errors import BadInput
from ascend_setup.host.cann import CannInstall, detect_cann, find_driver, same_cann
from ascend_setup.host.npu import npu_facts
from ascend_setup.matrix import load_matrix
from ascend_setup.nodes import hccn
from ascend_setup.utils.inputs import Name, PathText, Prose, read_host_text, validate

#: The variables a multi-node vLLM-Ascend run reads (vllm-ascend's multi-node tutorials), reported as set.
ENV_VARS = (
    "HCCL_IF_IP",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "HCCL_SOCKET_IFNAME",
    "HCCL_BUFFSIZE",
    "HCCL_CONNECT_TIMEOUT",
    "HCCL_EXEC_TIMEOUT",
    "HCCL_IF_BASE_PORT",
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",
    "ASCEND_RT_VISIBLE_DEVICES",
)
#: One hccn_tool query: the driver answers in well under a second; a wedged one must not hold the node.
HCCN_TIMEOUT = 10.0
MAX_NPUS, MAX_NICS, MAX_PORTS = 64, 256, 65536
WEDGED = "did not answer"
_TLS = re.compile(r"tls switch\[(\d)\]", re.I)
Port = Annotated[int, Field(strict=True, ge=0, le=65535)]
#: A variable's value: an address, a NIC, a number, a card list (4 KiB is 1000 cards' worth).
EnvValue = Annotated[str, StringConstraints(strict=True, max_length=4096)]


class Nic(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: Name
    up: bool
    loopback: bool = False
    ipv4: List[Name] = Field(default_factory=list, max_length=256)  # "10.0.0.1/24"

    def addresses(self) -> List[str]:
        return [a.split("/")[0] for a in self.ipv4]


class Npu(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int = Field(strict=True, ge=0, le=4096)
    link: Optional[Name] = None
    health: Optional[Name] = None
    ip: Optional[Name] = None
    netmask: Optional[Name] = None
    tls: Optional[int] = Field(default=None, strict=True, ge=0, le=1)
    error: Optional[Prose] = None  # why a fact above is missing (the tool's words)


class Listener(BaseModel):
    model_config = ConfigDict(extra="ignore")

    port: Port
    address: Name


class NodeFacts(BaseModel):
    """What `doctor --node-facts --json` prints; the controller validates each node's answer against it."""

    model_config = ConfigDict(extra="ignore")

    hostname: Name
    tool: Name
    cann: Optional[Name] = None
    driver: Optional[Name] = None
    row: Optional[Name] = None
    npu_error: Optional[Prose] = None
    hccn_tool: Optional[PathText] = None
    npus: List[Npu] = Field(default_factory=list, max_length=MAX_NPUS)
    nics: Optional[List[Nic]] = Field(default=None, max_length=MAX_NICS)
    nic_error: Optional[Prose] = None
    env: Dict[Name, EnvValue] = Field(default_factory=dict, max_length=len(ENV_VARS) + 8)
    listening: List[Listener] = Field(default_factory=list, max_length=MAX_PORTS)
    clock: float

    def nic(self, name: str) -> Optional[Nic]:
        return next((n for n in self.nics or [] if n.name == name), None)

    def nic_of(self, address: str) -> Optional[Nic]:
        return next((n for n in self.nics or [] if address in n.addresses()), None)


# -- NICs ------------------------------------------------------------------------------------------------------


def parse_ip_json(text: str) -> List[Nic]:
    """`ip -j addr` (iproute2's JSON): each interface, whether it is up, and its IPv4 addresses with prefix."""
    nics = []
    for entry in json.loads(text or "[]"):
        if not isinstance(entry, dict) or not isinstance(entry.get("ifname"), str):
            continue
        flags = entry.get("flags") or []
        addrs = [
            f"{a['local']}/{a.get('prefixlen', 32)}"
            for a in entry.get("addr_info") or []
            if isinstance(a, dict) and a.get("family") == "inet" and isinstance(a.get("local"), str)
        ]
        nics.append(
            Nic(
                name=entry["ifname"],
                up="UP" in flags,
                loopback="LOOPBACK" in flags or entry.get("link_type") == "loopback",
                ipv4=addrs,
            )
        )
    return nics


def local_nics(ip: Optional[str] = None) -> Tuple[Optional[List[Nic]], Optional[str]]:
    """(NICs, None), or (None, why not): iproute2's `ip -j addr`, the one source that names each address's NIC."""
    exe = ip or shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip") if os.access(p, os.X_OK)), None)
    if exe is None:
        return None, "iproute2's ip is not installed: the NICs and their addresses are unknown"
    try:
        done = subprocess.run(
            [exe, "-j", "addr", "show"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
        if done.returncode != 0:
            return None, f"ip -j addr failed: {(done.stderr or done.stdout).strip()[:200]}"
        return parse_ip_json(done.stdout), None
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return None, f"ip -j addr could not be read: {exc}"


# -- ports -----------------------------------------------------------------------------------------------------


def _address(hex_address: str) -> str:
    """/proc/net/tcp's little-endian hex address as text (tcp6's as the IPv6 it is)."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def parse_proc_tcp(text: str) -> List[Listener]:
    """The listening sockets (state 0A) of /proc/net/tcp or tcp6, this network namespace's."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A" and ":" in fields[1]:
            address, port = fields[1].rsplit(":", 1)
            try:
                found.append(Listener(port=int(port, 16), address=_address(address)))
            except ValueError:
                continue
    return found


def listening(proc: Path = Path("/proc/net")) -> List[Listener]:
    found: List[Listener] = []
    for name in ("tcp", "tcp6"):
        found += parse_proc_tcp(read_host_text(proc / name, "proc-net") or "")
    return found


# -- NPUs ------------------------------------------------------------------------------------------------------


def find_hccn_tool(driver_root: Optional[str]) -> Optional[str]:
    """hccn_tool on PATH, else in the driver's tools (where the driver installs it and containers mount it)."""
    hit = shutil.which("hccn_tool")
    if hit:
        return hit
    places = [Path(driver_root) / "tools" / "hccn_tool"] if driver_root else []
    places.append(Path("/usr/local/Ascend/driver/tools/hccn_tool"))
    return next((str(p) for p in places if p.is_file() and os.access(p, os.X_OK)), None)


def run_hccn(exe: str, npu: int, *args: str, timeout: Optional[float] = None) -> Tuple[int, str]:
    timeout = HCCN_TIMEOUT if timeout is None else timeout
    try:
        done = subprocess.run(
            [exe, "-i", str(npu), *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        return done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        return 124, f"hccn_tool -i {npu} {' '.join(args)} {WEDGED} in {timeout:g} s"
    except OSError as exc:
        return 127, f"hccn_tool could not run: {exc}"


def npu_network(exe: str, npu: int) -> Npu:
    """One NPU's RoCE facts: `-link -g`, `-net_health -g`, `-ip -g`, `-tls -g`. A query that does not answer
    ends the NPU's (a wedged driver answers none of them: the node must still answer its controller)."""
    errors: List[str] = []

    def ask(*args: str) -> str:
        if any(WEDGED in e for e in errors):
            return ""
        code, text = run_hccn(exe, npu, *args)
        problem = hccn.tool_error(text) or (text.strip().splitlines()[-1] if code and text.strip() else None)
        if code and problem and problem not in errors:
            errors.append(problem)
        return text

    link = hccn.link_status(ask("-link", "-g"))
    health = hccn.net_health(ask("-net_health", "-g"))
    ip_text = ask("-ip", "-g")
    ip = hccn.device_ip(ip_text) if ip_text else hccn.DeviceIp(None, None)
    tls = _TLS.search(ask("-tls", "-g"))
    if ip.error and ip.error not in errors:
        errors.append(ip.error)
    answer = {
        "id": npu,
        "link": link,
        "health": health,
        "ip": ip.address,
        "netmask": ip.netmask,
        "tls": int(tls.group(1)) if tls and tls.group(1) in "01" else None,
        "error": "; ".join(errors)[:4096] or None,
    }
    try:  # a tool's answer past its bounds is a fact about the NPU (its words, escaped), not a crash
        return validate(Npu, answer, f"hccn_tool's answer for NPU {npu}")
    except BadInput as exc:
        return Npu(id=npu, error=exc.message[:4096])


def npus_network(exe: str, ids: List[int]) -> List[Npu]:
    """Every NPU's facts, in turn (hccn_tool is busy otherwise); after one that did not answer, the rest are
    not asked."""
    found: List[Npu] = []
    for i in ids:
        stuck = next((n for n in found if n.error and WEDGED in n.error), None)
        found.append(
            Npu(id=i, error=f"not asked: hccn_tool did not answer for NPU {stuck.id}") if stuck else npu_network(exe, i)
        )
    return found


# -- the node --------------------------------------------------------------------------------------------------


def row_of(install: Optional[CannInstall], matrix_file: Optional[str]) -> Optional[str]:
    """The matrix row of the installed CANN (None when the matrix has none: a node off the matrix)."""
    if install is None or install.version is None:
        return None
    return next((v for v in load_matrix(matrix_file).rows if same_cann(install.version, v)), None)


def gather(
    *, cann_home: Optional[str] = None, matrix_file: Optional[str] = None, env: Optional[Mapping[str, str]] = None
) -> NodeFacts:
    """This node's facts; every failure to learn one is a fact (an error text), never an exception."""
    env = os.environ if env is None else env
    installs = detect_cann(cann_home)
    install = installs[0] if installs else None
    driver = install.driver if install and install.driver else find_driver(Path(cann_home) if cann_home else None)
    npu = npu_facts(driver.root if driver else None)
    exe = find_hccn_tool(driver.root if driver else None)
    ids = sorted({int(c["npu"]) for c in npu.chips if c["npu"].isdigit()})[:MAX_NPUS]
    npus = npus_network(exe, ids) if exe else [Npu(id=i, error="hccn_tool not found") for i in ids]
    nics, nic_error = local_nics()
    facts = {
        "hostname": socket.gethostname() or "unknown",
        "tool": __version__,
        "cann": install.version if install else None,
        "driver": (driver.package_version or driver.version) if driver else None,
        "row": row_of(install, matrix_file),
        "npu_error": npu.error,
        "hccn_tool": exe,
        "npus": npus,
        "nics": nics,
        "nic_error": nic_error,
        "env": {k: env[k] for k in ENV_VARS if k in env},
        "listening": listening(),
        "clock": time.time(),
    }
    # what this node read (its variables, its files, its tools' answers) is input: one line naming the field
    return validate(
        NodeFacts,
        facts,
        "this node's facts",
        hint="a variable of a multi-node run is short text (vllm-ascend's multi-node tutorials)",
    )
