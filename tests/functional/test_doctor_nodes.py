"""`doctor --nodes` and `doctor --node-facts` as a user runs them: bad inventories are one line and exit 2 (a
JSON document under --json), one node's facts over a fake CANN, and a preflight whose nodes cannot be reached
(a command that does not exist, one that never answers) stays bounded and names them."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers.cli import assert_one_line_error
from helpers.fake_hccn import write_fake_hccn_tool

from ascend_setup.nodes.node_facts import NodeFacts
from ascend_setup.simulate.fake_cann import build_fake_cann


@pytest.mark.parametrize(
    "text, said",
    [
        (None, "does not exist"),
        ("nodes: []\n", "nodes: List should have at least 1 item"),
        ("nodes:\n  - {name: a, hots: b}\n", "nodes.0.hots: Extra inputs are not permitted"),
        ("nodes: [\n", "is not valid YAML"),
        # groups aliasing each other 30 levels deep (2^30 walks hung it), a group that is its own child
        (
            "g0: &g0 {hosts: {h: }}\n"
            + "".join(f"g{i}: &g{i} {{children: {{a: *g{i - 1}, b: *g{i - 1}}}}}\n" for i in range(1, 31)),
            "expand to more than 100000 nodes",
        ),
        ("all: &all {hosts: {h: }, children: {again: *all}}\n", "a cycle"),
        ("all: {hosts: {h: {ansible_port: [22]}}}\n", "all.hosts.h.ansible_port"),
    ],
)
def test_bad_inventories(cli, tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "nodes.yml"
    if text is not None:
        path.write_text(text)
    line = assert_one_line_error(cli("doctor", "--nodes", str(path), timeout=10))
    assert said in line and str(path) in line
    done = cli("doctor", "--nodes", str(path), "--json")
    assert done.returncode == 2 and said in json.loads(done.stdout)["error"]


def test_node_facts(cli, tmp_path: Path) -> None:
    fake = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    write_fake_hccn_tool(
        fake.root / "driver" / "tools",
        {
            "npus": {
                "0": {"link": "UP", "ip": "29.0.0.1", "health": "Success", "tls": 1},
                "1": {"link": "DOWN", "health": "Socket fail"},
            },
            "old": True,
        },
    )
    done = cli(
        "doctor",
        "--node-facts",
        "--json",
        env={"ASCEND_SETUP_CANN_HOME": str(fake.root), "HCCL_IF_IP": "10.0.0.1", "HCCL_BUFFSIZE": "512"},
    )
    assert done.returncode == 0, done.stderr
    facts = NodeFacts.model_validate(json.loads(done.stdout))
    assert (facts.cann, facts.driver, facts.row) == ("9.1.0", "25.2.0", "9.1.0")
    assert facts.hccn_tool == str(fake.root / "driver" / "tools" / "hccn_tool")  # found in the driver's tools
    assert [(n.id, n.link, n.ip, n.health, n.tls) for n in facts.npus] == [
        (0, "UP", "29.0.0.1", "Success", 1),
        (1, "DOWN", None, "Socket fail", 0),
    ]
    assert "no IP was preset" in (facts.npus[1].error or "")
    assert facts.env == {"HCCL_IF_IP": "10.0.0.1", "HCCL_BUFFSIZE": "512"}
    assert facts.nics is None or any(n.loopback for n in facts.nics)


HOSTILE_ENV = {
    "70 KB HCCL_BUFFSIZE": ("HCCL_BUFFSIZE", "9" * 70_000),
    "70 KB ASCEND_RT_VISIBLE_DEVICES": ("ASCEND_RT_VISIBLE_DEVICES", "0," * 35_000),
    "5 KB HCCL_IF_IP": ("HCCL_IF_IP", "1" * 5000),
}


@pytest.mark.parametrize("name, value", HOSTILE_ENV.values(), ids=list(HOSTILE_ENV))
def test_a_hostile_variable_is_bad_input_on_the_node(cli, tmp_path: Path, name: str, value: str) -> None:
    """The node's facts go through their model and the gate: exit 2 and one line naming the field (it was
    exit 1 'internal error')."""
    fake = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    done = cli(
        "doctor", "--node-facts", "--json", env={"ASCEND_SETUP_CANN_HOME": str(fake.root), name: value}, timeout=60
    )
    line = assert_one_line_error(done)
    assert f"env.{name}" in line and "internal error" not in line, line
    assert json.loads(done.stdout)["exit"] == 2


def test_a_hostile_hccn_tool_answer_is_a_fact_of_its_npu(cli, tmp_path: Path) -> None:
    """An answer past its bounds (a 700-character health) is that NPU's error, the node still answers."""
    fake = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    write_fake_hccn_tool(
        fake.root / "driver" / "tools",
        {"npus": {"0": {"link": "UP", "health": "Success" * 100}, "1": {"link": "UP", "health": "Success"}}},
    )
    done = cli("doctor", "--node-facts", "--json", env={"ASCEND_SETUP_CANN_HOME": str(fake.root)}, timeout=60)
    assert done.returncode == 0, done.stderr
    npus = NodeFacts.model_validate(json.loads(done.stdout)).npus
    assert "NPU 0 is invalid at health" in (npus[0].error or "") and npus[1].health == "Success"


def test_escapes_in_a_nodes_variables_reach_the_terminal_visible(cli, tmp_path: Path) -> None:
    """ESC and BEL in a node's values (its NIC, its address) are shown as text by the controller."""
    inventory = tmp_path / "nodes.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "nodes": [{"name": "here", "run": "", "command": [sys.executable, "-m", "ascend_setup"]}],
                "timeout": 60,
                "ping_timeout": 5,
            }
        )
    )
    done = cli(
        "doctor",
        "--nodes",
        str(inventory),
        env={"HCCL_IF_IP": "10.0.0.1\x1b]0;owned\x07", "GLOO_SOCKET_IFNAME": "eth\x1b[2J0"},
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    assert "10.0.0.1\\x1b]0;owned\\x07" in done.stdout and "eth\\x1b[2J0" in done.stdout


def test_unreachable_nodes_are_named_and_bounded(cli, tmp_path: Path) -> None:
    inventory = tmp_path / "nodes.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "nodes": [
                    {"name": "gone", "run": [str(tmp_path / "no-such-ssh")]},
                    {"name": "silent", "run": [sys.executable, "-c", "import time; time.sleep(120)"]},
                ]
            }
        )
    )
    start = time.monotonic()
    done = cli("doctor", "--nodes", str(inventory), "--node-timeout", "2", "--json")
    seconds = time.monotonic() - start
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    problems = {p["node"]: p for p in report["problems"]}
    assert set(problems) == {"gone", "silent"} and {p["check"] for p in problems.values()} == {"answer"}
    assert "could not start" in problems["gone"]["message"]
    assert "no answer in 2 s" in problems["silent"]["message"]
    assert seconds < 15, seconds
    text = cli("doctor", "--nodes", str(inventory), "--node-timeout", "2")
    assert text.returncode == 1 and "the node did not answer" in text.stdout and "silent" in text.stdout


def test_an_ansible_inventory_with_a_local_host(cli, tmp_path: Path) -> None:
    """The fleet's inventory as it is: a local host runs the tool here, with the fleet's ascend_setup_command;
    this machine has no NPU, and the preflight says so for that node."""
    fake = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "ascend": {
                    "hosts": {"here": {"ansible_connection": "local"}},
                    "vars": {"ascend_setup_command": [sys.executable, "-m", "ascend_setup"]},
                }
            }
        )
    )
    done = cli("doctor", "--nodes", str(inventory), "--json", env={"ASCEND_SETUP_CANN_HOME": str(fake.root)})
    report = json.loads(done.stdout)
    assert done.returncode == 1 and [n["name"] for n in report["nodes"] if n["answered"]] == ["here"], report
    assert report["nodes"][0]["facts"]["cann"] == "9.1.0"
    assert ("here", "hccn-tool") in {(p["node"], p["check"]) for p in report["problems"]}


def test_a_wedged_hccn_tool_holds_the_node_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first query that does not answer ends the node's hccn_tool queries: 16 NPUs x 4 queries of a
    wedged driver would otherwise outlast any controller's timeout."""
    from ascend_setup.nodes import node_facts

    tool = write_fake_hccn_tool(tmp_path, {"npus": {str(i): {"link": "UP"} for i in range(16)}, "hang": True})
    monkeypatch.setattr(node_facts, "HCCN_TIMEOUT", 0.5)
    start = time.monotonic()
    npus = node_facts.npus_network(str(tool), list(range(16)))
    assert time.monotonic() - start < 3
    assert "did not answer in 0.5 s" in (npus[0].error or "") and npus[0].link is None
    assert [n.error for n in npus[1:]] == ["not asked: hccn_tool did not answer for NPU 0"] * 15
