"""The nodes of a multi-node preflight, from a YAML file: our own inventory (`nodes:`, each with the command
prefix that reaches it), or the fleet's Ansible inventory (its hosts, reached by ssh, or run here when
`ansible_connection: local`). Either is validated by a bounded model: a wrong key is one line naming it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints, field_validator, model_validator
from typing_extensions import Annotated

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import Name, PathText, check_yaml_shape, read_input_text, validate

MAX_NODES = 1024
#: ssh never prompts and gives up on a silent host: the per-node timeout bounds the rest.
SSH = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10")
HINT = "see 'ascend-setup doctor --help': a YAML mapping with 'nodes:' (name, host, run), or an Ansible inventory"
Command = Union[PathText, List[PathText]]
#: A run prefix may be empty: the node is this machine.
Prefix = Union[Annotated[str, StringConstraints(strict=True, max_length=4096)], List[PathText]]


def _argv(value: Optional[Prefix]) -> Optional[List[str]]:
    if value is None:
        return None
    return shlex.split(value) if isinstance(value, str) else list(value)


class NodeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    host: Optional[Name] = None  # the ssh target (default: the name)
    run: Optional[Prefix] = None  # the prefix that reaches the node (default: ssh HOST); "" runs it here
    command: Optional[Command] = None  # ascend-setup on that node (default: the inventory's)

    @field_validator("run", "command")
    @classmethod
    def _splits(cls, value: Optional[Prefix]) -> Optional[Prefix]:
        if isinstance(value, str):
            shlex.split(value)  # an unclosed quote is a ValueError: pydantic names the field
        return value


class InventoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: List[NodeEntry] = Field(min_length=1, max_length=MAX_NODES)
    command: Command = "ascend-setup"
    # strict: a quoted "12" or "true" is a typo to name, not a number or a switch to guess
    timeout: float = Field(default=60, gt=0, le=3600, strict=True)  # seconds each node has to answer
    ping_timeout: float = Field(default=30, gt=0, le=3600, strict=True)  # seconds each node has for its pings
    clock_skew: float = Field(default=5, gt=0, le=3600, strict=True)  # seconds two nodes' clocks may differ
    ray: bool = Field(default=True, strict=True)  # the nodes serve through Ray: its variable is required
    ports: List[Annotated[int, Field(strict=True, ge=1, le=65535)]] = Field(default_factory=list, max_length=256)

    @model_validator(mode="after")
    def _unique(self) -> InventoryFile:
        names = [n.name for n in self.nodes]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"node names must be unique: {', '.join(twice)} appear twice")
        return self


@dataclass(frozen=True)
class Node:
    name: str
    run: List[str]  # the prefix; [] runs on this machine
    command: List[str]

    def argv(self, *args: str) -> List[str]:
        """The tool on that node with `args`."""
        return [*self.run, *self.command, *args]


@dataclass(frozen=True)
class Inventory:
    nodes: List[Node]
    timeout: float
    ping_timeout: float
    clock_skew: float
    ray: bool
    source: str
    ports: List[int] = field(default_factory=list)  # besides HCCL's and Ray's: vLLM's, the DP RPC port


class AnsibleVars(BaseModel):
    """The variables of a host or group this tool reads (Ansible's others are ignored): each bounded, so a
    list where a port is is one line naming it, not an ssh argument."""

    model_config = ConfigDict(extra="ignore")

    ansible_connection: Optional[Name] = None
    ansible_host: Optional[Name] = None
    ansible_user: Optional[Name] = None
    ansible_port: Optional[Annotated[int, Field(ge=1, le=65535)]] = None  # Ansible takes "2222" too
    ascend_setup_command: Optional[Command] = None


class AnsibleGroup(BaseModel):
    """A group of a YAML Ansible inventory: its hosts (each with its own variables), its child groups, its
    variables. The tree is finite and bounded: check_yaml_shape refused cycles and alias bombs."""

    model_config = ConfigDict(extra="forbid")

    hosts: Optional[Dict[Name, Optional[AnsibleVars]]] = Field(default=None, max_length=MAX_NODES)
    children: Optional[Dict[Name, Optional[AnsibleGroup]]] = Field(default=None, max_length=MAX_NODES)
    vars: Optional[AnsibleVars] = None


class AnsibleInventory(RootModel[Dict[Name, AnsibleGroup]]):
    pass


def _ansible_hosts(groups: Dict[str, AnsibleGroup], source: str) -> Dict[str, Dict[str, Any]]:
    """Every host of a YAML Ansible inventory (groups, children, group vars under each host's own). Each
    group's variables are the few this tool reads, so a host costs the same whatever the inventory holds."""
    hosts: Dict[str, Dict[str, Any]] = {}

    def walk(group: Optional[AnsibleGroup], inherited: Dict[str, Any]) -> None:
        if group is None:
            return
        merged = {**inherited, **(group.vars.model_dump(exclude_none=True) if group.vars else {})}
        for host, own in (group.hosts or {}).items():
            hosts.setdefault(host, {}).update({**merged, **(own.model_dump(exclude_none=True) if own else {})})
            if len(hosts) > MAX_NODES:
                raise BadInput(f"node inventory {source} names more than {MAX_NODES} nodes", hint=HINT)
        for child in (group.children or {}).values():
            walk(child, merged)

    for group in groups.values():
        walk(group, {})
    if not hosts:
        raise BadInput(f"node inventory {source} names no node", hint=HINT)
    return hosts


def _from_ansible(data: Dict[str, Any], source: str) -> Dict[str, Any]:
    """Our inventory's shape from an Ansible one: each host reached by ssh (its ansible_host, _user, _port),
    or here when ansible_connection is local; `ascend_setup_command` as the fleet's playbooks use it."""
    groups = validate(AnsibleInventory, data, f"node inventory {source}", hint=HINT).root
    nodes = []
    for name, v in _ansible_hosts(groups, source).items():
        if v.get("ansible_connection") == "local":
            run: List[str] = []
        else:
            target = str(v.get("ansible_host") or name)
            user = v.get("ansible_user")
            run = [
                *SSH,
                *(["-p", str(v["ansible_port"])] if v.get("ansible_port") else []),
                f"{user}@{target}" if user else target,
            ]
        entry: Dict[str, Any] = {"name": name, "run": run}
        if v.get("ascend_setup_command"):
            entry["command"] = v["ascend_setup_command"]
        nodes.append(entry)
    return {"nodes": nodes}


def parse_inventory(text: str, source: str) -> Inventory:
    check_yaml_shape(text, source, hint=HINT)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise BadInput(f"node inventory {source}{line} is not valid YAML", hint=HINT) from None
    if not isinstance(data, dict):
        raise BadInput(f"node inventory {source} is not a YAML mapping", hint=HINT)
    if "nodes" not in data and all(isinstance(g, dict) and ({"hosts", "children"} & set(g)) for g in data.values()):
        data = _from_ansible(data, source)
    model = validate(InventoryFile, data, f"node inventory {source}", hint=HINT)
    default = _argv(model.command) or ["ascend-setup"]  # an empty command list is the default too
    nodes = []
    for n in model.nodes:
        run = _argv(n.run)
        nodes.append(Node(n.name, [*SSH, n.host or n.name] if run is None else run, _argv(n.command) or default))
    return Inventory(nodes, model.timeout, model.ping_timeout, model.clock_skew, model.ray, source, list(model.ports))


def load_inventory(path: Union[str, Path]) -> Inventory:
    return parse_inventory(read_input_text(path, "inventory", what=f"node inventory {path}", hint=HINT), str(path))
