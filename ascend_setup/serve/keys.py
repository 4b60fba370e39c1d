"""What the installed vllm-ascend reads: its `--additional-config` keys and sub-keys and its environment variables,
from the source of `ascend_config.py` and `envs.py`, parsed with `ast`.

Never imported: importing vllm_ascend needs an NPU and CANN. Parsing is enough, because 0.23.0 reads its
configuration in a few plain shapes, which this module follows:
- `additional_config.get("k", ...)`, `additional_config["k"]`, `"k" in additional_config`, chained
  `.additional_config.get("k", {}).get("s")`, and `_get_config_value(additional_config, "k", "ENV", ...)`
  (the variable is then deprecated for the key);
- a sub-config `x = additional_config.get("k", {})` handed to a class, `Cls(**x)` (its `__init__` parameters
  and `kwargs.get("s")`) or `Cls(x)` (`param.get("s")`, and a class-level `_defaults` dict);
- `env_variables = {"NAME": ...}` in envs.py.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import read_input_text

CONFIG_NAME = "additional_config"


@dataclass
class KeySet:
    """The installed plugin's configuration surface."""

    version: str
    keys: Set[str] = field(default_factory=set)
    sub_keys: Dict[str, Set[str]] = field(default_factory=dict)  # only for keys whose sub-keys the source names
    env: Set[str] = field(default_factory=set)
    deprecated_env: Dict[str, str] = field(default_factory=dict)  # variable -> the additional_config key


def _const(node: Optional[ast.AST]) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_config(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == CONFIG_NAME) or \
        (isinstance(node, ast.Attribute) and node.attr == CONFIG_NAME)


def _get_key(node: ast.AST) -> Optional[str]:
    """`additional_config.get("k", ...)` -> "k"."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
            node.args and _is_config(node.func.value):
        return _const(node.args[0])
    return None


class _ConfigReader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.keys: Set[str] = set()
        self.sub_keys: Dict[str, Set[str]] = {}
        self.deprecated_env: Dict[str, str] = {}
        self.variables: Dict[str, str] = {}  # local name -> the key whose sub-config it holds
        self.handed: Dict[str, tuple] = {}  # class name -> (key, spread: bool)

    def visit_Assign(self, node: ast.Assign) -> None:
        key = _get_key(node.value)
        if key and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.variables[node.targets[0].id] = key
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        key = _get_key(node)
        if key:
            self.keys.add(key)
        func = node.func
        # additional_config.get("k", {}).get("s")
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            inner = _get_key(func.value)
            sub = _const(node.args[0])
            if inner and sub:
                self.sub_keys.setdefault(inner, set()).add(sub)
        if isinstance(func, ast.Attribute) and func.attr == "_get_config_value" and len(node.args) >= 3:
            key, env = _const(node.args[1]), _const(node.args[2])
            if key:
                self.keys.add(key)
                if env:
                    self.deprecated_env[env] = key
        if isinstance(func, ast.Name):
            for arg in node.args[:1]:
                if isinstance(arg, ast.Name) and arg.id in self.variables:
                    self.handed[func.id] = (self.variables[arg.id], False)
            for kw in node.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id in self.variables:
                    self.handed[func.id] = (self.variables[kw.value.id], True)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _is_config(node.value):
            key = _const(node.slice)
            if key:
                self.keys.add(key)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.In) and _is_config(node.comparators[0]):
            key = _const(node.left)
            if key:
                self.keys.add(key)
        self.generic_visit(node)


def _class_sub_keys(cls: ast.ClassDef, spread: bool) -> Set[str]:
    """The sub-keys a sub-config class reads: its parameters (spread with **) or `param.get("s")`, plus
    `kwargs.get("s")` and a class-level `_defaults` dict."""
    found: Set[str] = set()
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    for statement in cls.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Dict) and \
                any(isinstance(t, ast.Name) and t.id == "_defaults" for t in statement.targets):
            found |= {k for k in map(_const, statement.value.keys) if k}
    if init is None:
        return found
    params = [a.arg for a in init.args.args[1:]]
    readers = {init.args.kwarg.arg} if init.args.kwarg else set()
    if spread:
        found |= set(params) | {a.arg for a in init.args.kwonlyargs}
    elif params:
        readers.add(params[0])
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in readers and node.args:
            sub = _const(node.args[0])
            if sub:
                found.add(sub)
    return found


def _parse(path: Path) -> ast.Module:
    text = read_input_text(path, "metadata", what=f"installed vllm-ascend source {path}")
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise BadInput(f"installed vllm-ascend source {path} does not parse: {exc.msg} (line {exc.lineno})") from None


def read_config_keys(ascend_config: Path, keys: KeySet) -> None:
    tree = _parse(ascend_config)
    reader = _ConfigReader()
    reader.visit(tree)
    keys.keys |= reader.keys
    keys.deprecated_env.update(reader.deprecated_env)
    for key, subs in reader.sub_keys.items():
        keys.sub_keys.setdefault(key, set()).update(subs)
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for name, (key, spread) in reader.handed.items():
        if name in classes:
            keys.sub_keys.setdefault(key, set()).update(_class_sub_keys(classes[name], spread))


def read_env_names(envs: Path, keys: KeySet) -> None:
    """The keys of envs.py's `env_variables` dict: the variables vllm-ascend reads."""
    for node in ast.walk(_parse(envs)):
        target: ast.expr
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "env_variables" and isinstance(value, ast.Dict):
            keys.env |= {k for k in map(_const, value.keys) if k}


def installed_keys(package_dir: Path, version: str) -> KeySet:
    """The KeySet of the vllm_ascend package at `package_dir` (a venv's site-packages/vllm_ascend, or an sdist's)."""
    keys = KeySet(version=version)
    for name in ("ascend_config.py", "envs.py"):
        if not (package_dir / name).is_file():
            raise BadInput(f"the installed vllm-ascend {version} has no {name} under {package_dir}",
                           hint="reinstall it ('ascend-setup install'); serve validates keys against that source")
    read_config_keys(package_dir / "ascend_config.py", keys)
    read_env_names(package_dir / "envs.py", keys)
    return keys


def all_names(keys: KeySet) -> List[str]:
    """Every key, dotted sub-key and variable: what a misspelling is compared with."""
    return sorted(keys.keys | {f"{k}.{s}" for k, subs in keys.sub_keys.items() for s in subs} | keys.env)
