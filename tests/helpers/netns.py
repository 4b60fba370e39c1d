"""Nodes on one machine: network namespaces joined by veth pairs to a bridge in a namespace of its own, each
"node" reached through `ip netns exec NAME env ...` as its inventory's run prefix, with a fake CANN tree and a
fake hccn_tool (tests/helpers/fake_hccn.py) whose pings are real ICMP between the namespaces. No
packet leaves them: the bridge lives in its own namespace, and the host's namespace holds no end of a pair.

Names carry the pid and a random tag, so parallel runs never meet; `close()` removes every namespace it made
(deleting a namespace deletes its veth ends)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from ascend_setup.simulate.fake_cann import build_fake_cann
from helpers.fake_hccn import write_fake_hccn_tool

HOST_NET = "10.231.0.{}"  # the nodes' host NICs (HCCL_IF_IP): 10.231.0.N/24
NPU_NET = "10.232.{}.{}"  # NPU j of node N: 10.232.j.N/24, on the same bridge (the "RoCE plane")


def netns_usable() -> Optional[str]:
    """Why network namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "needs root (ip netns)"
    if shutil.which("ip") is None:
        return "needs iproute2's ip"
    probe = f"asprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class FakeNode:
    def __init__(self, cluster: Cluster, index: int, npus: int, cann: str) -> None:
        self.cluster, self.index = cluster, index
        self.name = f"node{index}"
        self.ns = f"{cluster.tag}n{index}"
        self.address = HOST_NET.format(index)
        self.dir = cluster.root / self.name
        self.cann = build_fake_cann(self.dir / "Ascend", version=cann)
        self.bin = self.dir / "bin"
        self.npus: Dict[str, Dict[str, Any]] = {
            str(j): {
                "link": "UP",
                "ip": NPU_NET.format(j, index),
                "netmask": "255.255.255.0",
                "health": "Success",
                "tls": 0,
            }
            for j in range(npus)
        }
        self.hang = False
        self.env: Dict[str, str] = {
            "HCCL_IF_IP": self.address,
            "GLOO_SOCKET_IFNAME": "eth0",
            "TP_SOCKET_IFNAME": "eth0",
            "HCCL_SOCKET_IFNAME": "eth0",
            "HCCL_BUFFSIZE": "512",
            "HCCL_CONNECT_TIMEOUT": "1200",
            "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
        }
        self.write_tool()

    def write_tool(self) -> None:
        write_fake_hccn_tool(self.bin, {"npus": self.npus, "hang": self.hang})

    def run_prefix(self) -> List[str]:
        """Into the namespace, with a clean environment: the fake tools first on PATH, the fake CANN, the
        node's variables."""
        env = {
            "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.dir),
            "LANG": "C.UTF-8",
            "ASCEND_SETUP_CANN_HOME": str(self.cann.root),
            **self.env,
        }
        return ["ip", "netns", "exec", self.ns, "env", "-i", *(f"{k}={v}" for k, v in env.items())]

    def remove_npu_address(self, npu: str) -> None:
        """The NPU's address off the wire (its card down, or unreachable): pings to it really fail."""
        ip("-n", self.ns, "addr", "del", f"{self.npus[npu]['ip']}/24", "dev", "eth0")

    def listen(self, port: int) -> subprocess.Popen:
        """A process in this namespace listening on `port` (the caller ends it)."""
        code = (
            "import socket,sys,time; s=socket.socket(); s.bind(('0.0.0.0',%d)); s.listen(); "
            "print('ready', flush=True); time.sleep(600)" % port
        )
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc


class Cluster:
    """`count` nodes of `npus` NPUs each, on one bridge; `cann` per node (default 9.1.0 everywhere)."""

    def __init__(self, root: Path, count: int = 3, npus: int = 2, cann: Optional[Dict[int, str]] = None) -> None:
        self.root = root
        self.tag = f"as{os.getpid() % 10000}{secrets.token_hex(2)}"
        self.made: List[str] = []
        self.nodes: List[FakeNode] = []
        try:
            self.bridge = f"{self.tag}br"
            self._add(self.bridge)
            ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
            ip("-n", self.bridge, "link", "set", "br0", "up")
            for i in range(1, count + 1):
                node = FakeNode(self, i, npus, (cann or {}).get(i, "9.1.0"))
                self._add(node.ns)
                ip("-n", self.bridge, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", node.ns)
                ip("-n", self.bridge, "link", "set", f"v{i}", "master", "br0", "up")
                ip("-n", node.ns, "link", "set", "lo", "up")
                ip("-n", node.ns, "link", "set", "eth0", "up")
                ip("-n", node.ns, "addr", "add", f"{node.address}/24", "dev", "eth0")
                for npu in node.npus.values():
                    ip("-n", node.ns, "addr", "add", f"{npu['ip']}/24", "dev", "eth0")
                self.nodes.append(node)
        except BaseException:
            self.close()
            raise

    def _add(self, ns: str) -> None:
        ip("netns", "add", ns)
        self.made.append(ns)

    def node(self, i: int) -> FakeNode:
        return self.nodes[i - 1]

    def inventory(self, **extra: Any) -> Path:
        """The inventory file the controller reads; every node's state is written as it is now."""
        for n in self.nodes:
            n.write_tool()
        path = self.root / "nodes.yml"
        path.write_text(
            yaml.safe_dump(
                {
                    "command": [sys.executable, "-m", "ascend_setup"],
                    "timeout": 60,
                    "ping_timeout": 30,
                    **extra,
                    "nodes": [{"name": n.name, "run": n.run_prefix()} for n in self.nodes],
                }
            )
        )
        return path

    def close(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made.clear()
