"""`doctor --nodes` on three nodes made of network namespaces (tests/helpers/netns.py): the controller reaches
each through `ip netns exec`, each node runs the real `doctor --node-facts` over a fake CANN and a fake
hccn_tool whose pings are real ICMP over the veth pairs. Scenarios: all pass; one node's NIC variable wrong;
one link down; an NPU that says UP but does not answer pings; one CANN different; one port taken; one node
that does not answer (the preflight stays bounded). Each run's wall time is printed (pytest -s shows it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from helpers.netns import Cluster, netns_usable

WHY_NOT = netns_usable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"network namespaces: {WHY_NOT}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    try:
        yield made
    finally:
        made.close()


def preflight(inventory: Path, *extra: str) -> Tuple[int, dict, float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "doctor", "--nodes", str(inventory), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - start
    print(f"preflight {' '.join(extra)}: {seconds:.2f} s")
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), seconds


def fails(report: dict) -> List[Tuple[str, str]]:
    return sorted((p["node"] or "*", p["check"]) for p in report["problems"] if p["severity"] == "fail")


def test_all_pass(cluster: Cluster) -> None:
    code, report, seconds = preflight(cluster.inventory())
    assert report["problems"] == [] and code == 0, report["problems"]
    assert [n["answered"] for n in report["nodes"]] == [True, True, True]
    # around the ring, 3 pairs x 2 NPUs, each a real ICMP ping inside the namespaces
    assert [(p["source"], p["npu"], p["target"], p["ok"]) for p in report["pings"]] == [
        ("node1", 0, "node2", True),
        ("node1", 1, "node2", True),
        ("node2", 0, "node3", True),
        ("node2", 1, "node3", True),
        ("node3", 0, "node1", True),
        ("node3", 1, "node1", True),
    ]
    assert report["env"]["node2"][:4] == [
        "export HCCL_IF_IP=10.231.0.2",
        "export GLOO_SOCKET_IFNAME=eth0",
        "export TP_SOCKET_IFNAME=eth0",
        "export HCCL_SOCKET_IFNAME=eth0",
    ]
    assert "export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1" in report["env"]["node1"]
    assert seconds < 30


def test_two_nodes(tmp_path: Path) -> None:
    pair = Cluster(tmp_path, count=2)  # the fake CANN's npu-smi lists two NPUs
    try:
        code, report, _ = preflight(pair.inventory())
    finally:
        pair.close()
    assert code == 0 and report["problems"] == []
    assert [(p["source"], p["npu"], p["target"], p["ok"]) for p in report["pings"]] == [
        ("node1", 0, "node2", True),
        ("node1", 1, "node2", True),
    ]
    assert "export ASCEND_RT_VISIBLE_DEVICES=0,1" in report["env"]["node1"]


def test_the_table_reads_at_80_columns(cluster: Cluster) -> None:
    cluster.node(2).env["GLOO_SOCKET_IFNAME"] = "eth9"
    done = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "doctor", "--nodes", str(cluster.inventory())],
        capture_output=True,
        text=True,
        timeout=300,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines if not line.startswith("export ")), done.stdout
    assert "GLOO_SOCKET_IFNAME=eth9" in done.stdout and "export HCCL_IF_IP=10.231.0.2" in done.stdout


def test_one_nic_variable_wrong(cluster: Cluster) -> None:
    cluster.node(2).env["GLOO_SOCKET_IFNAME"] = "eth9"
    code, report, _ = preflight(cluster.inventory())
    assert code == 1
    assert fails(report) == [("node2", "nic-vars"), ("node2", "nic-vars")]  # no such NIC; differs from the others
    messages = " ".join(p["message"] for p in report["problems"])
    assert "GLOO_SOCKET_IFNAME=eth9 is no NIC of this node" in messages
    assert all("gloo-connect" in p["prevents"] for p in report["problems"])
    assert report["env"]["node2"][1] == "export GLOO_SOCKET_IFNAME=eth0"  # the block says what it should be


def test_hccl_if_ip_not_on_the_node(cluster: Cluster) -> None:
    cluster.node(3).env["HCCL_IF_IP"] = "10.231.0.1"  # node1's
    code, report, _ = preflight(cluster.inventory())
    assert code == 1
    assert fails(report) == [("*", "unique-ip"), ("node3", "hccl-if-ip")]


def test_one_link_down(cluster: Cluster) -> None:
    node = cluster.node(2)
    node.npus["1"].update(link="DOWN", health="Fault")
    node.remove_npu_address("1")
    code, report, _ = preflight(cluster.inventory())
    assert code == 1
    assert fails(report) == [("node2", "npu-link")]
    assert "NPU 1: link status DOWN" in report["problems"][0]["message"]
    assert report["problems"][0]["prevents"] == ["hccl-nic-down"]
    assert all(p["ok"] for p in report["pings"]) and len(report["pings"]) == 4  # NPU 1 of node2 is not pinged


def test_an_npu_that_does_not_answer_pings(cluster: Cluster) -> None:
    cluster.node(3).remove_npu_address("0")  # hccn_tool still says UP with its IP: only the ping can tell
    code, report, _ = preflight(cluster.inventory())
    assert code == 1
    # node2 pings node3 on the ring, node3 pings node1: the address is gone both to answer and to send from
    assert fails(report) == [("node2", "npu-ping"), ("node3", "npu-ping")]
    failed = [p for p in report["pings"] if not p["ok"]]
    assert {(p["source"], p["target"], p["address"]) for p in failed} == {
        ("node2", "node3", "10.232.0.3"),
        ("node3", "node1", "10.232.0.1"),
    }
    assert next(p for p in failed if p["source"] == "node2")["detail"].startswith("recv time out")


def test_one_cann_different(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, cann={3: "9.0.1"})
    try:
        code, report, _ = preflight(cluster.inventory())
    finally:
        cluster.close()
    assert code == 1
    assert ("*", "same-cann") in fails(report)
    cann = next(p for p in report["problems"] if p["check"] == "same-cann")
    assert "9.1.0 on most nodes; node3: 9.0.1" in cann["message"]


def test_one_port_taken(cluster: Cluster) -> None:
    holder = cluster.node(1).listen(60003)
    try:
        code, report, _ = preflight(cluster.inventory())
    finally:
        holder.kill()
        holder.wait()
    assert code == 1
    assert fails(report) == [("node1", "ports")]
    problem = report["problems"][0]
    assert "port 60003" in problem["message"] and problem["prevents"] == ["hccl-port-in-use"]


def test_a_node_that_does_not_answer(cluster: Cluster) -> None:
    cluster.node(3).hang = True  # its driver is wedged: hccn_tool never returns
    code, report, seconds = preflight(cluster.inventory(timeout=5))
    assert code == 1
    assert fails(report) == [("node3", "answer")]
    assert "no answer in 5 s" in report["problems"][0]["message"]
    assert [p["target"] for p in report["pings"]] == ["node2", "node2"]  # the others still pinged each other
    assert seconds < 5 + 15, seconds
    assert running(str(cluster.node(3).bin)) == []  # the wedged node's processes were killed, not left behind


def running(marker: str) -> List[str]:
    """Live (not zombie) processes whose command line holds `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(f"{proc.name} {cmdline}")
    return found
