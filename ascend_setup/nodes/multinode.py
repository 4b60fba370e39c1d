"""`doctor --nodes FILE`: every node's facts at once (each bounded), the checks per node and across nodes,
the NPU pings around the ring of the nodes, and the environment block each node needs. Nothing stops at the
first problem: the report holds all of them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ascend_setup.errors import BadInput
from ascend_setup.nodes.compare import NodeView, Problem, check_across, node_problems
from ascend_setup.nodes.fanout import end_escaped, in_parallel, run_bounded
from ascend_setup.nodes.inventory import Inventory, Node
from ascend_setup.nodes.node_facts import NodeFacts
from ascend_setup.nodes.peers import PingOutcome, ping_problems, plan_pings, run_pings, unpinged
from ascend_setup.nodes.serve_env import env_blocks
from ascend_setup.utils.inputs import parse_json, validate

#: What the controller asks each node (the same tool, installed there).
FACTS_ARGS = ("doctor", "--node-facts", "--json")


def ask_node(node: Node, timeout: float) -> NodeView:
    """The node's facts through its run prefix, within `timeout`; any failure is the view's error."""
    before = time.time()
    answer = run_bounded(node.argv(*FACTS_ARGS), timeout)
    after = time.time()
    last = next((x.strip() for x in reversed(answer.stderr.splitlines()) if x.strip()), "")
    if answer.error:
        return NodeView(node.name, None, f"{answer.error}{f' ({last})' if last else ''}")
    try:
        data = parse_json(answer.stdout, f"{node.name}'s answer")
        if isinstance(data, dict) and "error" in data and "hostname" not in data:
            return NodeView(node.name, None, f"the tool there failed: {data.get('error')}")
        facts = validate(NodeFacts, data, f"{node.name}'s answer")
    except BadInput as exc:
        why = last if answer.returncode else exc.message
        return NodeView(node.name, None, f"exit {answer.returncode}: {why or exc.message}")
    return NodeView(node.name, facts, clock_window=(before, after))


@dataclass
class Preflight:
    views: List[NodeView]
    problems: List[Problem]
    pings: List[PingOutcome] = field(default_factory=list)
    env: Dict[str, List[str]] = field(default_factory=dict)
    seconds: float = 0.0
    note: Optional[str] = None

    @property
    def failed(self) -> bool:
        return any(p.severity == "fail" for p in self.problems)

    def to_json(self) -> Dict[str, Any]:
        return {
            "ok": not self.failed,
            "seconds": round(self.seconds, 2),
            "nodes": [
                {
                    "name": v.name,
                    "answered": v.facts is not None,
                    "error": v.error,
                    "facts": v.facts.model_dump() if v.facts else None,
                }
                for v in self.views
            ],
            "problems": [p.to_json() for p in self.problems],
            "pings": [o.to_json() for o in self.pings],
            "env": self.env,
            "note": self.note,
        }


def run_preflight(inventory: Inventory, ask: Callable[[Node, float], NodeView] = ask_node) -> Preflight:
    """Within the node timeout for the facts (a node asked late, past WIDTH nodes, gets what is left of it) and
    the ping timeout for the pings; whatever the nodes' commands left running is ended before it returns."""
    try:
        return _preflight(inventory, ask)
    finally:
        end_escaped()


def _preflight(inventory: Inventory, ask: Callable[[Node, float], NodeView]) -> Preflight:
    start = time.monotonic()
    views = in_parallel(
        inventory.nodes, lambda n: ask(n, min(inventory.timeout, start + inventory.timeout - time.monotonic()))
    )
    problems: List[Problem] = []
    for v in views:
        problems += node_problems(v, ray=inventory.ray, skew=inventory.clock_skew, ports=inventory.ports)
    problems += check_across(views)
    pings = plan_pings(views)
    nodes = {n.name: n for n in inventory.nodes}
    tools = {v.name: v.facts.hccn_tool for v in views if v.facts is not None and v.facts.hccn_tool}
    outcomes = run_pings(pings, nodes, tools, inventory.ping_timeout)
    problems += ping_problems(outcomes)
    return Preflight(
        views,
        problems,
        outcomes,
        env_blocks(views, ray=inventory.ray),
        time.monotonic() - start,
        unpinged(views, pings),
    )
