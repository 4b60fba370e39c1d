"""The environment each node needs to serve vLLM-Ascend across nodes, as vllm-ascend 0.23's multi-node
tutorials set it (DeepSeek-V3.1.md, ray.md): the cluster NIC and its address for HCCL, Gloo and TP, HCCL's
buffer and connect timeout, OpenMP pinned off, and Ray told to leave ASCEND_RT_VISIBLE_DEVICES alone."""

from __future__ import annotations

import ipaddress
from typing import Dict, List, Optional, Sequence, Tuple

from ascend_setup.nodes.compare import HCCL_DEFAULT_BUFFSIZE, IFNAME_VARS, RAY_VAR, NodeView
from ascend_setup.nodes.node_facts import NodeFacts

#: HCCL_CONNECT_TIMEOUT when no node sets one: the tutorials go from 120 s (HCCL's default) to 7200; the
#: ranks of a large model load for minutes before they connect.
CONNECT_TIMEOUT = 1200
Address = Tuple[str, str, ipaddress.IPv4Network]  # (NIC, address, its network)


def addresses(f: NodeFacts) -> List[Address]:
    found = []
    for nic in f.nics or []:
        if nic.loopback or not nic.up:
            continue
        for cidr in nic.ipv4:
            try:
                found.append((nic.name, cidr.split("/")[0], ipaddress.IPv4Interface(cidr).network))
            except ValueError:
                continue
    return found


def cluster_network(facts: Sequence[NodeFacts]) -> Optional[ipaddress.IPv4Network]:
    """A network every node has its own address in: the one the nodes talk over. A network where two nodes
    hold the same address is each node's private one (docker0's 172.17.0.1 on every host), not the cluster's.
    The one HCCL_IF_IP names wins; else the narrowest, the likeliest to be a dedicated segment."""
    owned: Dict[ipaddress.IPv4Network, List[str]] = {}
    for f in facts:
        for net, ips in _by_network(f).items():
            owned.setdefault(net, []).append(ips[0])
    shared = [n for n, ips in owned.items() if len(ips) == len(facts) and len(set(ips)) == len(ips)]
    for f in facts:
        try:
            ip = ipaddress.IPv4Address(f.env.get("HCCL_IF_IP", ""))
        except ValueError:
            continue
        hit = next((n for n in shared if ip in n), None)
        if hit is not None:
            return hit
    return min(shared, key=lambda n: (-n.prefixlen, int(n.network_address)), default=None)


def _by_network(f: NodeFacts) -> Dict[ipaddress.IPv4Network, List[str]]:
    found: Dict[ipaddress.IPv4Network, List[str]] = {}
    for _, ip, net in addresses(f):
        found.setdefault(net, []).append(ip)
    return found


def _common(values: Sequence[Optional[str]], default: int) -> str:
    """The nodes' value when every node that sets it sets the same whole number, else `default`."""
    numbers = {v for v in values if v and v.isdigit() and int(v) > 0}
    return numbers.pop() if len(numbers) == 1 else str(default)


def env_blocks(views: Sequence[NodeView], *, ray: bool) -> Dict[str, List[str]]:
    """Per answering node, its `export` lines (None for a node whose cluster NIC cannot be found)."""
    facts = [v.facts for v in views if v.facts is not None]
    net = cluster_network(facts)
    buffsize = _common([f.env.get("HCCL_BUFFSIZE") for f in facts], HCCL_DEFAULT_BUFFSIZE)
    timeout = _common([f.env.get("HCCL_CONNECT_TIMEOUT") for f in facts], CONNECT_TIMEOUT)
    blocks: Dict[str, List[str]] = {}
    for v in views:
        if v.facts is None:
            continue
        mine = [a for a in addresses(v.facts) if net is not None and a[2] == net]
        if not mine:
            blocks[v.name] = ["# no network is shared by every node: set HCCL_IF_IP and *_SOCKET_IFNAME by hand"]
            continue
        nic, ip, _ = mine[0]
        lines = [f"export HCCL_IF_IP={ip}"] + [f"export {var}={nic}" for var in IFNAME_VARS]
        lines += [
            f"export HCCL_BUFFSIZE={buffsize}",
            f"export HCCL_CONNECT_TIMEOUT={timeout}",
            "export HCCL_OP_EXPANSION_MODE=AIV",
            "export OMP_PROC_BIND=false",
            "export OMP_NUM_THREADS=1",
        ]
        if ray:
            cards = ",".join(str(i) for i in range(len(v.facts.npus)))
            lines += [f"export {RAY_VAR}=1"] + ([f"export ASCEND_RT_VISIBLE_DEVICES={cards}"] if cards else [])
        blocks[v.name] = lines
    return blocks
