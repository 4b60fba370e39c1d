"""Benchmark: `doctor --nodes` with 32, 128 and 256 nodes, as a user runs it (a child process, its wall time),
against the inventory's own timeouts. Two clusters, made in a temporary directory from fake nodes on this
machine (a run prefix that is a shell script; no ssh, no network):
- answering: every node answers `doctor --node-facts` with the facts of a real run over the fake CANN (its
  hostname and NPU addresses its own, 8 NPUs UP), and every hccn_tool ping succeeds at once;
- silent: no node answers; each is killed at the node timeout.

    .venv/bin/python benchmarks/nodes_fanout.py                    # 32, 128, 256 nodes
    .venv/bin/python benchmarks/nodes_fanout.py --nodes 64 --timeout 10 --ping-timeout 2

The terminal's report of the answering cluster is timed too. Target: every run within the node timeout plus
the ping timeout (plus start-up and the report's own work), growing linearly with the nodes: the per-node
figure printed beside the wall time stays flat.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import List

import yaml
from _common import REPO, clean_env, run

NPUS = 8
FAKE_NODE = """#!/bin/sh
# fake node: $1 is its name; then the command the controller runs there
name=$1; shift
case "$*" in
  *--node-facts*) exec cat "{facts}/$name.json" ;;
  *-ping*) echo "3 packets transmitted, 3 received, 0.00% packet loss" ;;
  *) echo "fake node: $*" >&2; exit 1 ;;
esac
"""
SILENT = "#!/bin/sh\nexec sleep 3600\n"


def real_facts(work: Path, env: dict) -> dict:
    """One real `doctor --node-facts --json` over the fake CANN with a fake hccn_tool: the shape every node sends."""
    from helpers.fake_hccn import write_fake_hccn_tool

    from ascend_setup.simulate.fake_cann import build_fake_cann

    fake = build_fake_cann(work / "Ascend", version="9.1.0")
    write_fake_hccn_tool(
        fake.root / "driver" / "tools",
        {"npus": {str(i): {"link": "UP", "ip": f"29.0.0.{i + 1}", "health": "Success", "tls": 0} for i in range(2)}},
    )
    done = run(
        [sys.executable, "-m", "ascend_setup", "doctor", "--node-facts", "--json"],
        {**env, "ASCEND_SETUP_CANN_HOME": str(fake.root)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cluster(work: Path, count: int, facts: dict, silent: bool, timeout: float, ping_timeout: float) -> Path:
    script = work / ("silent.sh" if silent else "node.sh")
    script.write_text(SILENT if silent else FAKE_NODE.format(facts=work / "facts"))
    script.chmod(0o755)
    (work / "facts").mkdir(exist_ok=True)
    for i in range(count):
        mine = copy.deepcopy(facts)
        mine["hostname"] = f"node{i}"
        template = mine["npus"][0]
        mine["npus"] = [{**template, "id": n, "ip": f"10.{n}.{i // 250}.{i % 250 + 1}"} for n in range(NPUS)]
        (work / "facts" / f"node{i}.json").write_text(json.dumps(mine))
    inventory = work / f"nodes-{count}-{'silent' if silent else 'answering'}.yml"
    # the facts are one recording, its clock read once: past the default 5 s of skew every node would be
    # "behind" (one more problem a node, by when the run came), so the skew allowed is the most there is
    inventory.write_text(
        yaml.safe_dump(
            {
                "nodes": [{"name": f"node{i}", "run": [str(script), f"node{i}"]} for i in range(count)],
                "timeout": timeout,
                "ping_timeout": ping_timeout,
                "ray": False,
                "clock_skew": 3600,
            }
        )
    )
    return inventory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[32, 128, 256])
    parser.add_argument("--timeout", type=float, default=10.0, help="the node timeout (default 10 s)")
    parser.add_argument("--ping-timeout", type=float, default=2.0, help="the ping timeout (default 2 s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nodes-fanout-") as tmp:
        work = Path(tmp)
        env = clean_env(work / "home")
        facts = real_facts(work, env)
        bound = args.timeout + args.ping_timeout
        print(f"node timeout {args.timeout:g} s, ping timeout {args.ping_timeout:g} s: bound {bound:g} s + start-up")
        rows: List[str] = []
        for silent in (False, True):
            for count in args.nodes:
                inventory = cluster(work, count, facts, silent, args.timeout, args.ping_timeout)
                start = time.monotonic()
                done = run(
                    [sys.executable, "-m", "ascend_setup", "doctor", "--nodes", str(inventory), "--json"],
                    env,
                    timeout=3600,
                    cwd=REPO,
                )
                seconds = time.monotonic() - start
                report = json.loads(done.stdout)
                answered = sum(n["answered"] for n in report["nodes"])
                pings = len(report["pings"])
                ok = sum(p["ok"] for p in report["pings"])
                text = ""
                if not silent:  # the terminal's report too: its tables and problems are what a person reads
                    start = time.monotonic()
                    run(
                        [sys.executable, "-m", "ascend_setup", "doctor", "--nodes", str(inventory)],
                        env,
                        timeout=3600,
                        cwd=REPO,
                    )
                    text = f", text report {time.monotonic() - start:.2f} s"
                rows.append(
                    f"{'silent' if silent else 'answering':9} {count:4} nodes: {seconds:6.2f} s "
                    f"({seconds / count * 1000:5.1f} ms/node), {answered} answered, {ok}/{pings} pings ok, "
                    f"{len(report['problems'])} problems, {len(done.stdout) / 1e6:.1f} MB of JSON{text}"
                    f"{'' if seconds <= bound + 5 else '  PAST THE BOUND'}"
                )
                print(rows[-1], flush=True)


if __name__ == "__main__":
    main()
