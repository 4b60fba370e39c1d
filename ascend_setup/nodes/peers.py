"""NPU to NPU across nodes, around a ring: each node's NPU i pings NPU i of the next node in the inventory (the
last node's, the first's), `hccn_tool -i N -ping -g address IP`, on the RoCE plane HCCL will use. Every NPU
thus sends and answers once, and a node's pings are as many as its NPUs, whatever the number of nodes: every
pair (N x (N-1) / 2 of them) would make the pings and their report grow with the square of the nodes, and a
real ping takes 3 s. hccn_tool answers one call at a time on a node ('hccn_tool is busy'), so each node runs
its pings in turn while the nodes run in parallel; the whole is bounded by the inventory's ping timeout."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ascend_setup.nodes import hccn
from ascend_setup.nodes.compare import NodeView, Problem, known_fix
from ascend_setup.nodes.fanout import in_parallel, run_bounded
from ascend_setup.nodes.inventory import Node

#: One ping call: the real tool sends 3 packets a second apart.
PING_CALL = 10.0


@dataclass(frozen=True)
class Ping:
    source: str
    npu: int
    target: str
    address: str

    def argv(self, node: Node, tool: str) -> List[str]:
        return [*node.run, tool, "-i", str(self.npu), "-ping", "-g", "address", self.address]


@dataclass
class PingOutcome:
    ping: Ping
    ok: bool
    detail: str

    def to_json(self) -> Dict[str, Any]:
        return {**asdict(self.ping), "ok": self.ok, "detail": self.detail}


def ring(views: Sequence[NodeView]) -> List[Tuple[NodeView, NodeView]]:
    """Each node and the next, the last and the first; two nodes are one pair."""
    if len(views) < 2:
        return []
    return [(views[i], views[(i + 1) % len(views)]) for i in range(len(views) if len(views) > 2 else 1)]


def plan_pings(views: Sequence[NodeView]) -> List[Ping]:
    """Around the ring of the nodes that answered with hccn_tool, NPU i of each to NPU i's IP on the next (an NPU
    with its link down or no IP is already a problem of its own, and is not pinged)."""
    pings = []
    usable = [v for v in views if v.facts is not None and v.facts.hccn_tool]
    for a, b in ring(usable):
        assert a.facts is not None and b.facts is not None
        targets = {n.id: n.ip for n in b.facts.npus if n.ip and n.link == "UP"}
        for npu in a.facts.npus:
            if npu.link == "UP" and npu.ip and targets.get(npu.id):
                pings.append(Ping(a.name, npu.id, b.name, str(targets[npu.id])))
    return pings


def run_pings(pings: Sequence[Ping], nodes: Dict[str, Node], tools: Dict[str, str], budget: float) -> List[PingOutcome]:
    """Every ping, the nodes in parallel and each node's in turn, all within `budget` seconds."""
    deadline = time.monotonic() + budget
    by_source: Dict[str, List[Ping]] = {}
    for p in pings:
        by_source.setdefault(p.source, []).append(p)

    def node_pings(source: str) -> List[PingOutcome]:
        done = []
        for p in by_source[source]:
            left = deadline - time.monotonic()
            if left <= 0:
                done.append(PingOutcome(p, False, f"not pinged: the {budget:g} s for the pings ran out"))
                continue
            answer = run_bounded(p.argv(nodes[source], tools[source]), min(PING_CALL, left))
            if answer.error:
                done.append(PingOutcome(p, False, answer.error))
                continue
            result = hccn.ping_result(answer.stdout + answer.stderr, answer.returncode or 0)
            done.append(PingOutcome(p, result.ok, result.detail))
        return done

    return [o for outcomes in in_parallel(list(by_source), node_pings) for o in outcomes]


def ping_problems(outcomes: Sequence[PingOutcome]) -> List[Problem]:
    problems = []
    for o in outcomes:
        if not o.ok:
            p = o.ping
            problems.append(
                Problem(
                    "npu-ping",
                    f"{p.source} NPU {p.npu} -> {p.target} NPU {p.npu} ({p.address}): {o.detail}",
                    known_fix(
                        "hccl-socket-timeout",
                        "check the NPU network between these two "
                        f"(hccn_tool -i {p.npu} -ping -g address {p.address} on {p.source}), "
                        "its routes and gateway (-gateway -g)",
                    ),
                    p.source,
                    prevents=("hccl-socket-timeout", "hccl-notify-timeout"),
                )
            )
    return problems


def unpinged(views: Sequence[NodeView], pings: Sequence[Ping]) -> Optional[str]:
    """Why no ping ran, when none did among two or more nodes."""
    if pings or sum(v.facts is not None for v in views) < 2:
        return None
    return "no NPU pair to ping (each node needs hccn_tool and an NPU that is UP with an IP)"
