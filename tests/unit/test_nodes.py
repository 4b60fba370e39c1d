"""The multi-node preflight in process: hccn_tool's real formats (and their drift between driver releases),
`ip -j addr` and /proc/net/tcp, the inventory (ours and Ansible's) with its bad inputs, every check's pass
and each of its failures on generated nodes, the fixes agreeing with triage's, the pings planned and the
environment block."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.knowledge.scan import triage
from ascend_setup.knowledge.signatures import SIGNATURES
from ascend_setup.nodes import hccn
from ascend_setup.nodes.compare import NodeView, Problem, check_across, known_fix, node_problems
from ascend_setup.nodes.inventory import SSH, load_inventory, parse_inventory
from ascend_setup.nodes.node_facts import NodeFacts, parse_ip_json, parse_proc_tcp
from ascend_setup.nodes.peers import PingOutcome, ping_problems, plan_pings
from ascend_setup.nodes.serve_env import env_blocks

# -- hccn_tool's formats (hicann/driver src/custom/network/hccn/ascend910B) -----------------------------------


@pytest.mark.parametrize(
    "text, status",
    [
        ("link status: UP\n", "UP"),
        ("link status: DOWN\n", "DOWN"),
        ("[device 0]link up count : 2\n", None),
        ("permission denied: pls check this cmd run permission.\n", None),
    ],
)
def test_link_status(text: str, status: Optional[str]) -> None:
    assert hccn.link_status(text) == status


@pytest.mark.parametrize(
    "text, health",
    [
        ("net health status: Success\n", "Success"),
        ("net health status: Socket fail\n", "Socket fail"),
        ("net health status: Socket failed\n", "Socket fail"),  # the older driver's word (mind-cluster's fixture)
        ("net health status: Receive timeout\n", "Receive timeout"),
        ("net health status: Init\n", "Init"),
        ("net health status: Detect ip set\n", "Detect ip set"),
        ("net health status: Fault\n", "Fault"),
        ("hccn_tool is busy, please try again.\n", None),
    ],
)
def test_net_health(text: str, health: Optional[str]) -> None:
    assert hccn.net_health(text) == health


def test_device_ip() -> None:
    assert hccn.device_ip("ipaddr:10.20.30.10\nnetmask:255.255.255.0\n") == hccn.DeviceIp(
        "10.20.30.10", "255.255.255.0"
    )
    none = hccn.device_ip("Get ipconf failed, because no ip was preset there!\n")
    assert none.address is None and none.error == "no IP was preset on this NPU"
    assert hccn.device_ip("permission denied: pls check this cmd run permission.\n").error.startswith("permission")


ROCE_OK = (
    "device 3 PING 29.1.137.205\nrecv seq=0,time=1.418000ms\nrecv seq=1,time=0.090000ms\n"
    "recv seq=2,time=0.081000ms\n3 packets transmitted, 3 received, 0.00% packet loss\n"
)
HCCS_OK = (
    "This pkt ping success!\nrecv seq 0, time = 1.234us, L1 plane check result = 0x0\n"
    "3 packets transmitted, 3 received, 0.00% packets loss\n"
)


@pytest.mark.parametrize(
    "text, code, ok, detail",
    [
        (ROCE_OK, 0, True, "3/3 received"),
        (HCCS_OK, 0, True, "3/3 received"),  # the A3 ping's `packets loss`
        (
            "device 0 PING 29.1.1.2\nrecv time out seq=0\nrecv seq=1,time=0.1ms\nrecv seq=2,time=0.1ms\n"
            "3 packets transmitted, 2 received, 33.33% packet loss\n",
            1,
            False,
            "recv time out seq",
        ),
        (
            "device 0 PING 29.1.1.2\nrecv seq=0,time=0.1ms\n3 packets transmitted, 2 received, 33.33% packet loss\n",
            0,
            False,
            "2/3 received, 33.33% loss",
        ),
        ("device 0 PING 29.1.1.2\nDestination Host Unreachable\n", 1, False, "Destination Host Unreachable"),
        ("hccn_tool is busy, please try again.\n", 1, False, "hccn_tool is busy, please try again."),
        (ROCE_OK, 1, False, "3/3 received, 0.00% loss"),
    ],
)  # the tool's exit code counts too
def test_ping_result(text: str, code: int, ok: bool, detail: str) -> None:
    result = hccn.ping_result(text, code)
    assert (result.ok, result.detail) == (ok, detail)


# -- the node's own facts ----------------------------------------------------------------------------------------

IP_JSON = (
    '[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"link_type":"loopback",'
    '"addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8},{"family":"inet6","local":"::1",'
    '"prefixlen":128}]},{"ifindex":2,"ifname":"enp189s0f0","flags":["BROADCAST","MULTICAST","UP",'
    '"LOWER_UP"],"link_type":"ether","addr_info":[{"family":"inet","local":"192.168.20.160","prefixlen":24},'
    '{"family":"inet6","local":"fe80::1","prefixlen":64}]},{"ifindex":3,"ifname":"docker0","flags":'
    '["NO-CARRIER","BROADCAST","MULTICAST"],"addr_info":[{"family":"inet","local":"172.17.0.1",'
    '"prefixlen":16}]}]'
)


def test_ip_json() -> None:
    nics = {n.name: n for n in parse_ip_json(IP_JSON)}
    assert nics["lo"].loopback and nics["lo"].ipv4 == ["127.0.0.1/8"]
    assert nics["enp189s0f0"].up and nics["enp189s0f0"].ipv4 == ["192.168.20.160/24"]
    assert not nics["docker0"].up and nics["docker0"].addresses() == ["172.17.0.1"]


PROC_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:411A 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: A014A8C0:EA60 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:18EB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1
"""
PROC_TCP6 = """\
  sl  local_address                         remote_address                        st
   0: 00000000000000000000000000000000:18EB 00000000000000000000000000000000:0000 0A
   1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A
"""


def test_listening_ports() -> None:
    assert [(x.port, x.address) for x in parse_proc_tcp(PROC_TCP)] == [(16666, "0.0.0.0"), (60000, "192.168.20.160")]
    assert [(x.port, x.address) for x in parse_proc_tcp(PROC_TCP6)] == [(6379, "::"), (8080, "::1")]


# -- the inventory ---------------------------------------------------------------------------------------------


def test_our_inventory(tmp_path: Path) -> None:
    inv = parse_inventory(
        "nodes:\n  - name: a\n  - name: b\n    host: 10.0.0.2\n"
        "  - {name: c, run: 'ip netns exec c', command: [python3, -m, ascend_setup]}\n"
        "  - {name: d, run: ''}\ntimeout: 5\nray: false\nports: [8000, 13389]\n",
        "x.yml",
    )
    a, b, c, d = inv.nodes
    assert a.argv("doctor") == [*SSH, "a", "ascend-setup", "doctor"]
    assert b.run == [*SSH, "10.0.0.2"]
    assert c.argv("doctor") == ["ip", "netns", "exec", "c", "python3", "-m", "ascend_setup", "doctor"]
    assert d.run == [] and inv.timeout == 5 and inv.ray is False and inv.ports == [8000, 13389]


def test_an_ansible_inventory() -> None:
    text = """
ascend:
  hosts:
    host1: {ansible_host: 10.0.0.1, ansible_user: root, ansible_port: 2222}
    host2:
  children:
    more:
      hosts:
        host3: {ansible_connection: local}
  vars:
    ascend_setup_command: [/opt/venv/bin/ascend-setup]
"""
    nodes = {n.name: n for n in parse_inventory(text, "hosts.yml").nodes}
    assert nodes["host1"].run == [*SSH, "-p", "2222", "root@10.0.0.1"]
    assert nodes["host2"].run == [*SSH, "host2"]
    assert nodes["host3"].run == [] and nodes["host3"].command == ["/opt/venv/bin/ascend-setup"]


@pytest.mark.parametrize(
    "text, said",
    [
        ("nodes: []\n", "nodes: List should have at least 1 item"),
        ("nodes:\n  - {name: a, colour: red}\n", "nodes.0.colour: Extra inputs are not permitted"),
        ("nodes:\n  - {name: a}\n  - {name: a}\n", "node names must be unique: a appear twice"),
        ("nodes:\n  - {name: a, run: \"ssh 'x\"}\n", "nodes.0.run"),
        ("nodes:\n  - {name: a}\ntimeout: 0\n", "timeout: Input should be greater than 0"),
        ("nodes:\n  - {name: a}\nports: [70000]\n", "ports.0: Input should be less than or equal to 65535"),
        ("nodes: [a\n", "is not valid YAML"),
        ("- a\n", "is not a YAML mapping"),
        ("all:\n  hosts: {}\n", "names no node"),
        # an Ansible inventory's shape, each wrong value one line naming it (they were AttributeError/TypeError)
        ("all: {hosts: [a, b]}\n", "all.hosts: Input should be a valid dictionary"),
        ("all: {hosts: {a: x}}\n", "all.hosts.a: Input should be a valid dictionary"),
        ("all: {vars: [1], hosts: {a: }}\n", "all.vars"),
        ("all: {children: [1]}\n", "all.children: Input should be a valid dictionary"),
        ("all: {hosts: {a: {ansible_port: [1]}}}\n", "all.hosts.a.ansible_port"),
        ("all: {hosts: {a: {ansible_port: 70000}}}\n", "all.hosts.a.ansible_port"),
        ("all: {hosts: {a: {ansible_host: [x]}}}\n", "all.hosts.a.ansible_host"),
        ("all: {hosts: {a: }, colour: red}\n", "all.colour: Extra inputs are not permitted"),
        ("all: {hosts: {" + ", ".join(f"h{i}: " for i in range(1100)) + "}}\n", "all.hosts"),
        # groups that alias each other: 2^30 walks, or a group that is its own child
        (
            "g0: &g0 {hosts: {h: }}\n"
            + "".join(f"g{i}: &g{i} {{children: {{a: *g{i - 1}, b: *g{i - 1}}}}}\n" for i in range(1, 31)),
            "expand to more than",
        ),
        ("all: &all {hosts: {h: }, children: {again: *all}}\n", "a cycle"),
    ],
)
def test_bad_inventories(text: str, said: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_inventory(text, "bad.yml")
    assert said in caught.value.message and "bad.yml" in caught.value.message


def test_a_missing_inventory(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        load_inventory(tmp_path / "none.yml")


# -- the checks, on generated nodes ----------------------------------------------------------------------------


def node_data(i: int) -> Dict[str, Any]:
    """A healthy node i: two NPUs up with IPs, the cluster NIC eth0 at 10.0.0.i, every variable set."""
    return {
        "hostname": f"h{i}",
        "tool": "0.1.0",
        "cann": "9.1.0",
        "driver": "25.2.0",
        "row": "9.1.0",
        "hccn_tool": "/usr/local/Ascend/driver/tools/hccn_tool",
        "npus": [
            {"id": n, "link": "UP", "health": "Success", "ip": f"29.0.{n}.{i}", "netmask": "255.255.255.0", "tls": 0}
            for n in (0, 1)
        ],
        "nics": [
            {"name": "lo", "up": True, "loopback": True, "ipv4": ["127.0.0.1/8"]},
            {"name": "eth0", "up": True, "ipv4": [f"10.0.0.{i}/24"]},
            {"name": "eth1", "up": True, "ipv4": [f"172.16.{i}.1/24"]},
        ],
        "env": {
            "HCCL_IF_IP": f"10.0.0.{i}",
            "GLOO_SOCKET_IFNAME": "eth0",
            "TP_SOCKET_IFNAME": "eth0",
            "HCCL_SOCKET_IFNAME": "eth0",
            "HCCL_BUFFSIZE": "512",
            "HCCL_CONNECT_TIMEOUT": "1200",
            "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
        },
        "listening": [{"port": 22, "address": "0.0.0.0"}],
        "clock": 1000.0,
    }


def views(change: Callable[[List[Dict[str, Any]]], None] = lambda d: None) -> List[NodeView]:
    data = [node_data(i) for i in (1, 2, 3)]
    change(data)
    return [NodeView(f"n{i}", NodeFacts.model_validate(d), clock_window=(999.0, 1001.0)) for i, d in enumerate(data, 1)]


def problems(vs: List[NodeView]) -> List[Problem]:
    found = [p for v in vs for p in node_problems(v, ray=True, skew=5)]
    return found + check_across(vs)


def test_healthy_nodes_pass() -> None:
    assert problems(views()) == []


def env(i: int, **values: Optional[str]) -> Callable[[List[Dict[str, Any]]], None]:
    def change(data: List[Dict[str, Any]]) -> None:
        for k, v in values.items():
            if v is None:
                data[i]["env"].pop(k, None)
            else:
                data[i]["env"][k] = v

    return change


def npu(i: int, n: int, **values: Any) -> Callable[[List[Dict[str, Any]]], None]:
    return lambda data: data[i]["npus"][n].update(values)


def fact(i: int, **values: Any) -> Callable[[List[Dict[str, Any]]], None]:
    return lambda data: data[i].update(copy.deepcopy(values))


#: Each failure of each check: (what changes, the (node, check, severity) it yields, words its message holds).
FAILURES: Dict[str, Tuple[Callable[[List[Dict[str, Any]]], None], List[Tuple[Optional[str], str, str]], str]] = {
    "link down": (npu(1, 1, link="DOWN", health="Fault"), [("n2", "npu-link", "fail")], "NPU 1: link status DOWN"),
    "no device ip": (
        npu(0, 0, ip=None, error="no IP was preset on this NPU"),
        [("n1", "npu-ip", "fail")],
        "no IP was preset",
    ),
    "unhealthy": (npu(2, 0, health="Socket fail"), [("n3", "npu-health", "fail")], "Socket fail"),
    "hccn busy": (
        npu(2, 1, link=None, health=None, error="hccn_tool is busy, please try again."),
        [("n3", "npu-link", "fail")],
        "busy",
    ),
    "no hccn_tool": (fact(0, hccn_tool=None), [("n1", "hccn-tool", "fail")], "hccn_tool not found"),
    "no npu": (fact(0, npus=[]), [("n1", "npu", "fail"), (None, "npu-count", "warn")], "lists no NPU"),
    "npu-smi error": (
        fact(1, npu_error="dcmi module initialize failed. ret is -8005", npus=[]),
        [("n2", "npu", "fail"), (None, "npu-count", "warn")],
        "-8005",
    ),
    "ifname unset": (env(0, GLOO_SOCKET_IFNAME=None), [("n1", "nic-vars", "fail")], "GLOO_SOCKET_IFNAME unset"),
    "ifname missing": (
        env(0, GLOO_SOCKET_IFNAME="eth9", TP_SOCKET_IFNAME="eth9", HCCL_SOCKET_IFNAME="eth9"),
        [("n1", "nic-vars", "fail")],
        "eth9 is no NIC",
    ),
    "ifname loopback": (
        env(1, GLOO_SOCKET_IFNAME="lo", TP_SOCKET_IFNAME="lo", HCCL_SOCKET_IFNAME="lo"),
        [("n2", "nic-vars", "fail"), ("n2", "hccl-if-ip", "fail")],
        "loopback",
    ),
    "ifnames differ": (env(2, TP_SOCKET_IFNAME="eth1"), [("n3", "nic-vars", "fail")], "name different NICs"),
    "nic down": (lambda d: d[0]["nics"][1].update(up=False), [("n1", "nic-vars", "fail")], "eth0 is down"),
    "nic without ipv4": (
        lambda d: d[0]["nics"][1].update(ipv4=[]),
        [("n1", "nic-vars", "fail"), ("n1", "hccl-if-ip", "fail")],
        "has no IPv4",
    ),
    "if_ip unset": (env(0, HCCL_IF_IP=None), [("n1", "hccl-if-ip", "fail")], "HCCL_IF_IP unset"),
    "if_ip not ipv4": (env(0, HCCL_IF_IP="node1"), [("n1", "hccl-if-ip", "fail")], "not an IPv4"),
    "if_ip elsewhere": (env(0, HCCL_IF_IP="10.0.0.9"), [("n1", "hccl-if-ip", "fail")], "no address of this node"),
    "if_ip other nic": (env(0, HCCL_IF_IP="172.16.1.1"), [("n1", "hccl-if-ip", "fail")], "is on eth1, not on eth0"),
    "if_ip twice": (
        env(1, HCCL_IF_IP="10.0.0.1"),
        [("n2", "hccl-if-ip", "fail"), (None, "unique-ip", "fail")],
        "10.0.0.1",
    ),
    "buffsize unset": (
        env(0, HCCL_BUFFSIZE=None),
        [("n1", "hccl-buffsize", "warn"), (None, "same-hccl-env", "fail")],
        "HCCL_BUFFSIZE",
    ),
    "buffsize bad": (
        env(0, HCCL_BUFFSIZE="lots"),
        [("n1", "hccl-buffsize", "fail"), (None, "same-hccl-env", "fail")],
        "not a positive whole",
    ),
    "buffsize differs": (env(2, HCCL_BUFFSIZE="200"), [(None, "same-hccl-env", "fail")], "HCCL_BUFFSIZE differs"),
    "timeout unset": (env(0, HCCL_CONNECT_TIMEOUT=None), [("n1", "hccl-connect-timeout", "warn")], "default 120"),
    "timeout bad": (env(0, HCCL_CONNECT_TIMEOUT="-5"), [("n1", "hccl-connect-timeout", "fail")], "-5"),
    "ray unset": (env(1, RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=None), [("n2", "ray-var", "fail")], "unset"),
    "ray zero": (env(1, RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES="0"), [("n2", "ray-var", "fail")], "'0'"),
    "hccl port": (fact(0, listening=[{"port": 16666, "address": "0.0.0.0"}]), [("n1", "ports", "fail")], "port 16666"),
    "hccl base port": (
        fact(2, listening=[{"port": 60015, "address": "10.0.0.3"}]),
        [("n3", "ports", "fail")],
        "port 60015",
    ),
    "moved base port": (
        lambda d: (
            d[2]["env"].update(HCCL_IF_BASE_PORT="61000"),
            d[2].update(listening=[{"port": 61002, "address": "::"}]),
        ),
        [("n3", "ports", "fail")],
        "port 61002",
    ),
    "ray port": (fact(0, listening=[{"port": 6379, "address": "0.0.0.0"}]), [("n1", "ports", "warn")], "Ray's GCS"),
    "clock ahead": (fact(1, clock=1010.0), [("n2", "clock", "fail")], "9.0 s ahead of"),
    "clock behind": (fact(2, clock=980.0), [("n3", "clock", "fail")], "19.0 s behind"),
    "cann differs": (
        fact(2, cann="9.0.1", row="9.0.1"),
        [(None, "same-cann", "fail"), (None, "same-row", "fail")],
        "n3: 9.0.1",
    ),
    "driver differs": (fact(0, driver="24.1.rc2"), [(None, "same-driver", "fail")], "n1: 24.1.rc2"),
    "tool differs": (fact(1, tool="0.0.9"), [(None, "same-tool", "fail")], "n2: 0.0.9"),
    "off the matrix": (fact(1, row=None), [(None, "same-row", "fail")], "n2: none"),
    "device ip twice": (npu(1, 0, ip="29.0.0.1"), [(None, "unique-ip", "fail")], "device IP 29.0.0.1"),
    "tls differs": (npu(2, 1, tls=1), [(None, "same-tls", "fail")], "n3 NPU 1: 1"),
    "fewer npus": (lambda d: d[2]["npus"].pop(), [(None, "npu-count", "warn")], "n3: 1"),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_each_failure(case: str) -> None:
    change, expected, words = FAILURES[case]
    found = problems(views(change))
    assert sorted(((p.node, p.check, p.severity) for p in found), key=str) == sorted(expected, key=str), found
    assert any(words in p.message for p in found), [p.message for p in found]
    assert all(p.fix for p in found)


def test_without_ray_its_variable_and_ports_are_not_asked() -> None:
    vs = views(
        lambda d: (
            env(0, RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=None)(d),
            d[0].update(listening=[{"port": 6379, "address": "0.0.0.0"}]),
        )
    )
    assert [p for v in vs for p in node_problems(v, ray=False, skew=5)] == []


def test_the_inventory_s_ports() -> None:
    vs = views(fact(1, listening=[{"port": 13389, "address": "0.0.0.0"}]))
    assert [p for v in vs for p in node_problems(v, ray=True, skew=5)] == []
    (p,) = [p for v in vs for p in node_problems(v, ray=True, skew=5, ports=[13389])]
    assert (p.node, p.check, p.severity) == ("n2", "ports", "fail") and "port 13389" in p.message


def test_a_node_that_did_not_answer() -> None:
    vs = views()
    vs[1] = NodeView("n2", None, "no answer in 5 s")
    found = problems(vs)
    assert [(p.node, p.check) for p in found] == [("n2", "answer")]
    assert "no answer in 5 s" in found[0].message


def test_the_fixes_are_triages() -> None:
    """Each problem's `prevents` names a triage signature whose example log triage really names, and whose
    fix the problem repeats: the preflight and the post-mortem say the same thing."""
    named = [p for case in FAILURES.values() for p in problems(views(case[0]))]
    named += ping_problems([PingOutcome(plan_pings(views())[0], False, "recv time out")])
    ids = {s.id: s for s in SIGNATURES}
    prevented = set()
    for p in named:
        for sig in p.prevents:
            assert sig in ids, (p.check, sig)
            diagnosis = triage(list(ids[sig].example))
            assert diagnosis is not None and diagnosis.id == sig
            prevented.add(sig)
        if p.prevents:
            assert any(ids[s].fix.text in p.fix for s in p.prevents), (p.check, p.fix)
    assert {
        "hccl-socket-timeout",
        "hccl-notify-timeout",
        "gloo-connect",
        "hccl-nic-down",
        "hccl-port-in-use",
        "ray-npu-as-gpu",
        "hccl-device-ip-unset",
        "hccl-transport-init",
    } <= prevented
    assert known_fix("gloo-connect").startswith("export GLOO_SOCKET_IFNAME")


# -- pings and the environment block ---------------------------------------------------------------------------


def test_pings_are_planned_around_the_ring_and_skip_dead_npus() -> None:
    vs = views(npu(1, 1, link="DOWN"))
    planned = [(p.source, p.npu, p.target, p.address) for p in plan_pings(vs)]
    assert planned == [
        ("n1", 0, "n2", "29.0.0.2"),
        ("n2", 0, "n3", "29.0.0.3"),
        ("n3", 0, "n1", "29.0.0.1"),
        ("n3", 1, "n1", "29.0.1.1"),
    ]
    vs[2] = NodeView("n3", None, "no answer")
    assert [(p.source, p.target) for p in plan_pings(vs)] == [("n1", "n2")]  # two nodes: one pair


@pytest.mark.parametrize("count", [2, 3, 32, 256])
def test_each_node_pings_as_many_as_it_has_npus(count: int) -> None:
    """The plan is linear in the nodes: every NPU sends once and is pinged once (every pair was quadratic)."""
    from ascend_setup.nodes.peers import ring

    nodes = [NodeView(f"n{i}", None) for i in range(count)]
    pairs = ring(nodes)
    assert len(pairs) == (1 if count == 2 else count)
    assert {a.name for a, _ in pairs} | {b.name for _, b in pairs} == {n.name for n in nodes}


def test_ping_failures_are_problems() -> None:
    ping = plan_pings(views())[0]
    assert ping_problems([PingOutcome(ping, True, "3/3 received")]) == []
    (p,) = ping_problems([PingOutcome(ping, False, "recv time out seq")])
    assert (p.node, p.check) == ("n1", "npu-ping") and "29.0.0.2" in p.message and "recv time out" in p.message


def test_the_environment_block_names_the_shared_network() -> None:
    """eth1's networks differ per node; eth0's 10.0.0.0/24 is shared: the block names eth0 even where a node
    set eth1 (and the preflight says so)."""
    vs = views(
        env(
            1,
            GLOO_SOCKET_IFNAME="eth1",
            TP_SOCKET_IFNAME="eth1",
            HCCL_SOCKET_IFNAME="eth1",
            HCCL_IF_IP="172.16.2.1",
            HCCL_BUFFSIZE=None,
        )
    )
    blocks = env_blocks(vs, ray=True)
    assert blocks["n2"][:4] == [
        "export HCCL_IF_IP=10.0.0.2",
        "export GLOO_SOCKET_IFNAME=eth0",
        "export TP_SOCKET_IFNAME=eth0",
        "export HCCL_SOCKET_IFNAME=eth0",
    ]
    assert "export HCCL_BUFFSIZE=512" in blocks["n1"] and "export HCCL_CONNECT_TIMEOUT=1200" in blocks["n3"]
    assert blocks["n3"][-2:] == [
        "export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1",
        "export ASCEND_RT_VISIBLE_DEVICES=0,1",
    ]
    assert not any("RAY" in line for line in env_blocks(vs, ray=False)["n1"])


def test_a_private_network_on_every_node_is_not_the_cluster_s() -> None:
    """docker0 holds 172.17.0.1 on every node: shared, wider, but no node reaches another over it."""

    def docker(data: List[Dict[str, Any]]) -> None:
        for d in data:
            d["nics"].append({"name": "docker0", "up": True, "ipv4": ["172.17.0.1/16"]})
            d["env"].pop("HCCL_IF_IP")

    assert env_blocks(views(docker), ray=False)["n3"][:2] == [
        "export HCCL_IF_IP=10.0.0.3",
        "export GLOO_SOCKET_IFNAME=eth0",
    ]


def test_no_shared_network_is_said() -> None:
    vs = views(lambda d: d[2]["nics"][1].update(ipv4=["10.9.9.3/24"]))
    assert env_blocks(vs, ray=True)["n3"][0].startswith("# no network is shared")
