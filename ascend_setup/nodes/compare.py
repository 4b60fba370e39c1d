"""The multi-node checks: each node's facts on their own, then across the nodes. Every problem is returned
at once, each with its fix and the failure it prevents (a signature of knowledge's triage: the log line the
run would end with, far from its cause, if the problem is left)."""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ascend_setup.knowledge.signatures import SIGNATURES
from ascend_setup.nodes import hccn
from ascend_setup.nodes.node_facts import NodeFacts

IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")
RAY_VAR = "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"
#: HCCL's defaults as its plog prints them (vllm-ascend#5468).
HCCL_DEFAULT_BUFFSIZE, HCCL_DEFAULT_CONNECT_TIMEOUT = 200, 120
#: The host ports HCCL listens on: 16666 (vllm-ascend#1955) and one from HCCL_IF_BASE_PORT (default 60000)
#: per local rank (#405, #1253: EJ0003); 16 ranks on an A3 node.
HCCL_PORT, HCCL_BASE_PORT, HCCL_RANKS = 16666, 60000, 16
RAY_PORTS = {6379: "Ray's GCS", 8265: "Ray's dashboard"}


@dataclass(frozen=True)
class Problem:
    check: str
    message: str
    fix: str
    node: Optional[str] = None  # None: across the nodes
    severity: str = "fail"  # or "warn"
    prevents: Tuple[str, ...] = ()  # triage signature ids (knowledge/signatures.py)

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        data["prevents"] = list(self.prevents)
        return data


@dataclass
class NodeView:
    """A node as the checks see it: its facts, or why it gave none; the clock's offset from the controller's
    (the interval the node's reading must lie in)."""

    name: str
    facts: Optional[NodeFacts]
    error: Optional[str] = None
    clock_window: Tuple[float, float] = (0.0, 0.0)  # (earliest, latest) controller time of the node's reading
    passed: List[str] = field(default_factory=list)


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(value) if value is not None and value.strip() else None
    except ValueError:
        return None


def known_fix(signature: str, extra: str = "") -> str:
    """The fix triage gives for `signature` (the failure a check prevents), with what this check adds: the
    preflight and the post-mortem say the same thing."""
    text = next(s.fix.text for s in SIGNATURES if s.id == signature)
    return f"{text}; {extra}" if extra else text


# -- one node --------------------------------------------------------------------------------------------------


def check_npus(name: str, f: NodeFacts) -> List[Problem]:
    """Every NPU's RoCE port UP, with an IP, and healthy (hccn_tool's -link, -ip, -net_health)."""
    if f.npu_error:
        return [
            Problem(
                "npu",
                f"npu-smi: {f.npu_error}",
                "install the driver, or run 'ascend-setup doctor' on the node for the cause",
                name,
            )
        ]
    if not f.npus:
        return [Problem("npu", "npu-smi lists no NPU", "check the driver with 'npu-smi info'", name)]
    if f.hccn_tool is None:
        return [
            Problem(
                "hccn-tool",
                "hccn_tool not found (on PATH or in the driver's tools): the NPUs' device IPs "
                "are unknown, to the preflight and to HCCL",
                known_fix("hccl-device-ip-unset", "on a host, install the driver's tools"),
                name,
                prevents=("hccl-device-ip-unset",),
            )
        ]
    problems = []
    for npu in f.npus:
        tool = hccn.tool_error(npu.error or "")
        if tool and npu.link is None:
            problems.append(
                Problem(
                    "npu-link",
                    f"NPU {npu.id}: hccn_tool failed: {tool}",
                    "run the preflight as root (hccn_tool needs it), one at a time",
                    name,
                )
            )
            continue
        if npu.link != "UP":
            problems.append(
                Problem(
                    "npu-link",
                    f"NPU {npu.id}: link status {npu.link or 'unknown'} (hccn_tool -i {npu.id} -link -g)",
                    known_fix("hccl-nic-down", f"the card is NPU {npu.id}"),
                    name,
                    prevents=("hccl-nic-down",),
                )
            )
        if npu.ip is None:
            problems.append(
                Problem(
                    "npu-ip",
                    f"NPU {npu.id}: no device IP ({npu.error or 'none set'})",
                    f"on the host set it: hccn_tool -i {npu.id} -ip -s address ADDR netmask MASK "
                    "(and keep /etc/hccn.conf in step); in a container, " + known_fix("hccl-device-ip-unset"),
                    name,
                    prevents=("hccl-device-ip-unset",),
                )
            )
        if npu.link == "UP" and npu.health != hccn.HEALTHY:
            problems.append(
                Problem(
                    "npu-health",
                    f"NPU {npu.id}: net health status {npu.health or 'unknown'} "
                    f"(hccn_tool -i {npu.id} -net_health -g; healthy is {hccn.HEALTHY})",
                    known_fix(
                        "hccl-nic-down",
                        f"here the detect IP (`hccn_tool -i {npu.id} "
                        "-netdetect -g`) and the gateway must answer from the NPU network",
                    ),
                    name,
                    prevents=("hccl-nic-down",),
                )
            )
    return problems


def check_nic_vars(name: str, f: NodeFacts) -> List[Problem]:
    """GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME and HCCL_SOCKET_IFNAME: set, equal, naming a NIC that exists, is
    up, is not loopback and carries an IPv4 address; HCCL_IF_IP an address of that NIC."""
    fix_all = known_fix("gloo-connect", "the block below names the NIC")
    problems = []
    values = {v: f.env.get(v, "") for v in IFNAME_VARS}
    unset = [v for v, x in values.items() if not x]
    if unset:
        problems.append(
            Problem(
                "nic-vars",
                f"{', '.join(unset)} unset: Gloo and HCCL pick an interface "
                "themselves (Gloo falls back to the loopback address)",
                fix_all,
                name,
                prevents=("gloo-connect", "hccl-socket-timeout"),
            )
        )
    if len({x for x in values.values() if x}) > 1:
        problems.append(
            Problem(
                "nic-vars",
                "the socket-interface variables name different NICs: "
                + ", ".join(f"{v}={x}" for v, x in values.items() if x),
                fix_all,
                name,
                prevents=("gloo-connect",),
            )
        )
    for nic_name in sorted({x for x in values.values() if x}):
        users = "/".join(v.split("_")[0] for v, x in values.items() if x == nic_name)
        if f.nics is None:
            problems.append(
                Problem(
                    "nic-vars",
                    f"cannot check {users} {nic_name}: {f.nic_error}",
                    "install iproute2 on the node",
                    name,
                    severity="warn",
                )
            )
            continue
        nic = f.nic(nic_name)
        why = (
            "is no NIC of this node (it has: " + ", ".join(n.name for n in f.nics) + ")"
            if nic is None
            else "is the loopback interface: the other nodes cannot reach it"
            if nic.loopback
            else "is down"
            if not nic.up
            else "has no IPv4 address"
            if not nic.ipv4
            else None
        )
        if why:
            problems.append(
                Problem(
                    "nic-vars",
                    f"{users}_SOCKET_IFNAME={nic_name} {why}",
                    fix_all,
                    name,
                    prevents=("gloo-connect", "hccl-socket-timeout"),
                )
            )
    problems += check_if_ip(
        name,
        f,
        next((x for x in values.values() if x), None),
        known_fix(
            "hccl-transport-init",
            "HCCL_IF_IP must be an address of the NIC the *_SOCKET_IFNAME variables name (the block below)",
        ),
    )
    return problems


def check_if_ip(name: str, f: NodeFacts, ifname: Optional[str], fix: str) -> List[Problem]:
    ip = f.env.get("HCCL_IF_IP", "")
    prevents = ("hccl-socket-timeout", "hccl-transport-init")
    if not ip:
        return [
            Problem("hccl-if-ip", "HCCL_IF_IP unset: HCCL chooses the host NIC itself", fix, name, prevents=prevents)
        ]
    try:
        ipaddress.IPv4Address(ip)
    except ValueError:
        return [Problem("hccl-if-ip", f"HCCL_IF_IP={ip} is not an IPv4 address", fix, name, prevents=prevents)]
    if f.nics is None:
        return []
    owner = f.nic_of(ip)
    if owner is None:
        return [Problem("hccl-if-ip", f"HCCL_IF_IP={ip} is no address of this node", fix, name, prevents=prevents)]
    if owner.loopback:
        return [Problem("hccl-if-ip", f"HCCL_IF_IP={ip} is a loopback address", fix, name, prevents=prevents)]
    if ifname and owner.name != ifname and f.nic(ifname) is not None:
        return [
            Problem(
                "hccl-if-ip",
                f"HCCL_IF_IP={ip} is on {owner.name}, not on {ifname} (the *_SOCKET_IFNAME)",
                fix,
                name,
                prevents=prevents,
            )
        ]
    return []


def check_hccl_numbers(name: str, f: NodeFacts) -> List[Problem]:
    """HCCL_BUFFSIZE and HCCL_CONNECT_TIMEOUT: unset is HCCL's default (a warning), not a number a failure."""
    problems = []
    for var, default, what, span in (
        ("HCCL_BUFFSIZE", HCCL_DEFAULT_BUFFSIZE, "MB of buffer per communicator", "200-1024"),
        ("HCCL_CONNECT_TIMEOUT", HCCL_DEFAULT_CONNECT_TIMEOUT, "seconds to connect the ranks", "120-7200"),
    ):
        value = f.env.get(var)
        number = _int(value)
        wanted = (
            f"export {var} on every node (the tutorials use {span})"
            if value is None
            else f"export {var}={default} or larger"
        )
        prevents: Tuple[str, ...] = ()
        if var == "HCCL_CONNECT_TIMEOUT":
            prevents, wanted = ("hccl-socket-timeout",), known_fix("hccl-socket-timeout", wanted)
        check = var.lower().replace("_", "-")
        if value is None:
            problems.append(
                Problem(
                    check,
                    f"{var} unset: HCCL's default {default} {what}",
                    wanted,
                    name,
                    severity="warn",
                    prevents=prevents,
                )
            )
        elif number is None or number <= 0:
            problems.append(
                Problem(
                    check, f"{var}={value} is not a positive whole number ({what})", wanted, name, prevents=prevents
                )
            )
    return problems


def check_ray(name: str, f: NodeFacts, ray: bool) -> List[Problem]:
    if not ray or f.env.get(RAY_VAR) == "1":
        return []
    value = f.env.get(RAY_VAR)
    return [
        Problem(
            "ray-var",
            f"{RAY_VAR} {'unset' if value is None else f'is {value!r}'}: Ray rewrites "
            "ASCEND_RT_VISIBLE_DEVICES for its workers",
            known_fix("ray-npu-as-gpu"),
            name,
            prevents=("ray-npu-as-gpu",),
        )
    ]


def planned_ports(f: NodeFacts, ray: bool, extra: Sequence[int] = ()) -> Dict[int, str]:
    """The ports this node's ranks will listen on, by what uses them; `extra` the inventory's own (vLLM's
    API port, --data-parallel-rpc-port)."""
    base = _int(f.env.get("HCCL_IF_BASE_PORT")) or HCCL_BASE_PORT
    ports = {HCCL_PORT: "HCCL's listen port"}
    ports.update({p: f"HCCL's host NIC port (HCCL_IF_BASE_PORT {base} + rank)" for p in range(base, base + HCCL_RANKS)})
    if ray:
        ports.update(RAY_PORTS)
    ports.update({p: "a port the inventory lists" for p in extra})
    return ports


def check_ports(name: str, f: NodeFacts, ray: bool, extra: Sequence[int] = ()) -> List[Problem]:
    plan = planned_ports(f, ray, extra)
    taken: Dict[int, List[str]] = {}
    for listener in f.listening:
        if listener.port in plan:
            taken.setdefault(listener.port, []).append(listener.address)
    problems = []
    for port in sorted(taken):
        ray_port = port in RAY_PORTS
        problems.append(
            Problem(
                "ports",
                f"port {port} ({plan[port]}) is already listened on ({', '.join(sorted(set(taken[port])))})",
                "the Ray you started for this job holds it: fine; else stop what holds it "
                "(`ss -ltnp 'sport = :%d'`)" % port
                if ray_port
                else known_fix("hccl-port-in-use", f"`ss -ltnp 'sport = :{port}'` names the holder"),
                name,
                severity="warn" if ray_port else "fail",
                prevents=() if ray_port else ("hccl-port-in-use",),
            )
        )
    return problems


def check_clock(view: NodeView, skew: float) -> List[Problem]:
    """The node's clock against the controller's: its reading was taken inside clock_window, so an offset is
    counted only beyond the time the answer took."""
    assert view.facts is not None
    earliest, latest = view.clock_window
    ahead, behind = view.facts.clock - latest, earliest - view.facts.clock
    off = ahead if ahead > 0 else -behind if behind > 0 else 0.0
    if abs(off) <= skew:
        return []
    return [
        Problem(
            "clock",
            f"the clock is {abs(off):.1f} s {'ahead of' if off > 0 else 'behind'} the "
            f"controller's (bound {skew:g} s): logs do not line up, and TLS and Ray's timeouts misjudge",
            "sync every node's clock (chrony or systemd-timesyncd against one NTP source)",
            view.name,
        )
    ]


def node_problems(view: NodeView, *, ray: bool, skew: float, ports: Sequence[int] = ()) -> List[Problem]:
    if view.facts is None:
        return [
            Problem(
                "answer",
                f"the node did not answer: {view.error}",
                "check the node's run command by hand (ssh HOST ascend-setup doctor --node-facts --json); "
                "the tool must be installed on it",
                view.name,
            )
        ]
    f = view.facts
    return (
        check_npus(view.name, f)
        + check_nic_vars(view.name, f)
        + check_hccl_numbers(view.name, f)
        + check_ray(view.name, f, ray)
        + check_ports(view.name, f, ray, ports)
        + check_clock(view, skew)
    )


# -- across the nodes ------------------------------------------------------------------------------------------


def _odd_ones(values: Dict[str, Optional[str]]) -> Tuple[Optional[str], List[str]]:
    """(the most common value, the nodes that differ from it); ties keep the first node's value."""
    counts = Counter(values.values())
    first = next(iter(values.values()))
    common = max(counts, key=lambda v: (counts[v], v == first))
    return common, [n for n, v in values.items() if v != common]


def check_versions(views: Sequence[NodeView]) -> List[Problem]:
    """The same CANN, driver, matrix row and ascend-setup on every node."""
    answered = [v for v in views if v.facts is not None]
    if len(answered) < 2:
        return []
    problems = []
    fixes = {
        "cann": ("install the same CANN toolkit on every node (one row of the matrix)", ()),
        "driver": ("install the same driver (Ascend-hdk) on every node", ()),
        "row": ("take one row of the compatibility matrix on every node ('ascend-setup matrix list')", ()),
        "tool": ("install the same ascend-setup on every node", ()),
    }
    for key, (fix, prevents) in fixes.items():
        values = {v.name: getattr(v.facts, key) for v in answered}
        common, odd = _odd_ones(values)
        if odd:
            shown = "; ".join(f"{n}: {values[n] or 'none'}" for n in odd)
            problems.append(
                Problem(
                    f"same-{key}", f"{key} differs: {common or 'none'} on most nodes; {shown}", fix, prevents=prevents
                )
            )
    return problems


def check_across(views: Sequence[NodeView]) -> List[Problem]:
    """Addresses unique across nodes, one TLS switch for every NPU, one HCCL_BUFFSIZE, one NPU count."""
    answered = [v for v in views if v.facts is not None]
    problems = check_versions(views)
    owners: Dict[str, List[str]] = {}
    for v in answered:
        assert v.facts is not None
        if v.facts.env.get("HCCL_IF_IP"):
            owners.setdefault(f"HCCL_IF_IP {v.facts.env['HCCL_IF_IP']}", []).append(v.name)
        for npu in v.facts.npus:
            if npu.ip:
                owners.setdefault(f"device IP {npu.ip}", []).append(f"{v.name} NPU {npu.id}")
    for what, who in owners.items():
        if len(who) > 1:
            problems.append(
                Problem(
                    "unique-ip",
                    f"{what} is on {', '.join(who)}",
                    known_fix("hccl-transport-init"),
                    prevents=("hccl-transport-init",),
                )
            )
    tls = {
        f"{v.name} NPU {n.id}": str(n.tls)
        for v in answered
        for n in v.facts.npus  # type: ignore[union-attr]
        if n.tls is not None
    }
    if tls and len(set(tls.values())) > 1:
        common, odd = _odd_ones(tls)  # type: ignore[arg-type]
        problems.append(
            Problem(
                "same-tls",
                f"the NPUs' TLS switch differs: {common} on most; " + ", ".join(f"{k}: {tls[k]}" for k in odd),
                "set one TLS switch on every NPU (`hccn_tool -i N -tls -g` reads it: EI0006 names "
                "inconsistent TLS as a cause); else " + known_fix("hccl-socket-timeout"),
                prevents=("hccl-socket-timeout",),
            )
        )
    for var in ("HCCL_BUFFSIZE",):
        values = {v.name: v.facts.env.get(var) for v in answered}  # type: ignore[union-attr]
        if len(set(values.values())) > 1:
            problems.append(
                Problem(
                    "same-hccl-env",
                    f"{var} differs: " + ", ".join(f"{n}: {x or 'unset'}" for n, x in values.items()),
                    f"export one {var} on every node",
                )
            )
    counts = {v.name: str(len(v.facts.npus)) for v in answered}  # type: ignore[union-attr]
    if len(set(counts.values())) > 1:
        problems.append(
            Problem(
                "npu-count",
                "the nodes have different numbers of NPUs: " + ", ".join(f"{n}: {c}" for n, c in counts.items()),
                "check the missing cards with npu-smi info; TP and DP sizes must fit the smallest",
                severity="warn",
            )
        )
    return problems
