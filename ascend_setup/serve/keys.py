"""What the installed vllm-ascend reads: its `--additional-config` keys and sub-keys, their types where the source
shows them, and its environment variables, from every module of the installed package (0.23.0 reads the config
in ascend_config.py, utils.py, platform.py, attention/kvcomp_attn/attention_utils.py, ...), parsed with `ast`.

Never imported: importing vllm_ascend needs an NPU and CANN. Parsing is enough, because 0.23.0 reads its
configuration in a few plain shapes, which this module follows:
- `additional_config.get("k", ...)`, `additional_config["k"]`, `"k" in additional_config`, chained
  `.additional_config.get("k", {}).get("s")`, and `_get_config_value(additional_config, "k", "ENV", ...)`
  (the variable is then deprecated for the key);
- a sub-config `x = additional_config.get("k", {})` handed to a class, `Cls(**x)` (its `__init__` parameters
  and `kwargs.get("s")`) or `Cls(x)` (`param.get("s")`, and a class-level `_defaults` dict);
- `env_variables = {"NAME": ...}` in envs.py (a `lambda: bool(...)` / `int(...)` gives the variable's type);
- a type: a `.get("k", <constant>)` default, a spread class's parameter default, or the variable
  `_get_config_value` falls back to; a key read with two types has none (`bool(x)` says nothing: 0.23.0 also
  takes `bool()` of a list);
- a key whose only read is `if "k" in additional_config:` followed by a warning that says "deprecated", or by a
  `raise` (vllm-ascend main does this for retired keys), is deprecated or removed, not read; the replacement is
  what the message says to use.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

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
    types: Dict[str, str] = field(default_factory=dict)  # key or dotted sub-key -> bool | int | float | str
    deprecated: Dict[str, str] = field(default_factory=dict)  # key read only to warn -> what the warning says
    removed: Dict[str, str] = field(default_factory=dict)  # key read only to raise -> what the error says


def _const(node: Optional[ast.AST]) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_config(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == CONFIG_NAME) or (
        isinstance(node, ast.Attribute) and node.attr == CONFIG_NAME
    )


def _get_key(node: ast.AST) -> Optional[str]:
    """`additional_config.get("k", ...)` -> "k"."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and _is_config(node.func.value)
    ):
        return _const(node.args[0])
    return None


_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}


def _const_type(node: Optional[ast.AST]) -> Optional[str]:
    return _TYPES.get(type(node.value)) if isinstance(node, ast.Constant) else None


def _said(node: ast.AST) -> str:
    """The text of the first string (or f-string's literal parts) under `node`."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and len(sub.value) > 8:
            return sub.value
        if isinstance(sub, ast.JoinedStr):
            return "".join(
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{...}" for v in sub.values
            )
    return ""


def _retirement(body: List[ast.stmt]) -> Optional[Tuple[str, str]]:
    """("removed" | "deprecated", message) when a branch only raises, or only warns about a deprecation."""
    for statement in body:
        if isinstance(statement, ast.Raise):
            return "removed", _said(statement)
        call = statement.value if isinstance(statement, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr.startswith("warn")
            and "deprecat" in _said(call).lower()
        ):
            return "deprecated", _said(call)
    return None


class _ConfigReader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.keys: Set[str] = set()
        self.sub_keys: Dict[str, Set[str]] = {}
        self.deprecated_env: Dict[str, str] = {}
        self.types: Dict[str, Set[str]] = {}
        self.retired: Dict[str, Tuple[str, str]] = {}  # key -> (removed | deprecated, message)
        self.variables: Dict[str, str] = {}  # local name or attribute -> the key whose sub-config it holds
        self.handed: Dict[str, Tuple[str, bool]] = {}  # class name -> (key, spread: bool)

    def typed(self, name: str, kind: Optional[str]) -> None:
        if kind:
            self.types.setdefault(name, set()).add(kind)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        key = (
            _const(test.left)
            if isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.In)
            and _is_config(test.comparators[0])
            else None
        )
        retired = _retirement(node.body) if key else None
        if key and retired:
            self.retired[key] = retired
            for statement in node.body + node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def _holder(self, target: ast.AST) -> Optional[str]:
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            return f"self.{target.attr}"
        return None

    def _assigned(self, targets: List[ast.expr], value: Optional[ast.AST]) -> None:
        key = _get_key(value) if value is not None else None
        if key and len(targets) == 1:
            holder = self._holder(targets[0])
            if holder:
                self.variables[holder] = key

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assigned([node.target], node.value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        key = _get_key(node)
        if key:
            self.keys.add(key)
            self.typed(key, _const_type(node.args[1]) if len(node.args) > 1 else None)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            # additional_config.get("k", {}).get("s"), or x.get("s") where x (or self.x) holds the sub-config
            holder = self._holder(func.value)
            inner = _get_key(func.value) or (self.variables.get(holder) if holder else None)
            sub = _const(node.args[0])
            if inner and sub:
                self.sub_keys.setdefault(inner, set()).add(sub)
                self.typed(f"{inner}.{sub}", _const_type(node.args[1]) if len(node.args) > 1 else None)
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
        if _is_config(node.value) and not isinstance(node.ctx, ast.Store):
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


def _class_sub_keys(cls: ast.ClassDef, spread: bool) -> Dict[str, Optional[str]]:
    """The sub-keys a sub-config class reads, with the type its default shows: its parameters (spread with **)
    or `param.get("s")`, plus `kwargs.get("s")` and a class-level `_defaults` dict."""
    found: Dict[str, Optional[str]] = {}
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    for statement in cls.body:
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Dict)
            and any(isinstance(t, ast.Name) and t.id == "_defaults" for t in statement.targets)
        ):
            found.update(
                {k: _const_type(v) for k, v in zip(map(_const, statement.value.keys), statement.value.values) if k}
            )
    if init is None:
        return found
    positional = init.args.args[1:]
    params = [a.arg for a in positional]
    readers = {init.args.kwarg.arg} if init.args.kwarg else set()
    if spread:
        defaults = [None] * (len(positional) - len(init.args.defaults)) + list(init.args.defaults)
        found.update({a.arg: _const_type(d) for a, d in zip(positional, defaults)})
        found.update({a.arg: _const_type(d) for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults)})
    elif params:
        readers.add(params[0])
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in readers
            and node.args
        ):
            sub = _const(node.args[0])
            if sub:
                found.setdefault(sub, _const_type(node.args[1]) if len(node.args) > 1 else None)
    return found


def _parse(path: Path, text: Optional[str] = None) -> ast.Module:
    if text is None:
        text = read_input_text(path, "metadata", what=f"installed vllm-ascend source {path}")
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise BadInput(f"installed vllm-ascend source {path} does not parse: {exc.msg} (line {exc.lineno})") from None


def read_config_keys(source: Path, keys: KeySet, types: Dict[str, Set[str]]) -> None:
    """What one module of the package reads of `additional_config` (into `keys`; the types seen into `types`).
    A module that never names it is not parsed (443 modules in 0.23.0; parsing all takes seconds)."""
    text = read_input_text(source, "metadata", what=f"installed vllm-ascend source {source}")
    if CONFIG_NAME not in text:
        return
    tree = _parse(source, text)
    reader = _ConfigReader()
    reader.visit(tree)
    keys.keys |= reader.keys
    keys.deprecated_env.update(reader.deprecated_env)
    for key, subs in reader.sub_keys.items():
        keys.sub_keys.setdefault(key, set()).update(subs)
    for name, kinds in reader.types.items():
        types.setdefault(name, set()).update(kinds)
    for key, (how, message) in reader.retired.items():
        (keys.removed if how == "removed" else keys.deprecated)[key] = " ".join(message.split())
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for name, (key, spread) in reader.handed.items():
        if name in classes:
            for sub, kind in _class_sub_keys(classes[name], spread).items():
                keys.sub_keys.setdefault(key, set()).add(sub)
                if kind:
                    types.setdefault(f"{key}.{sub}", set()).add(kind)


def _lambda_type(node: Optional[ast.AST]) -> Optional[str]:
    """`lambda: bool(int(os.getenv(...)))` -> bool; `lambda: int(...)` -> int."""
    body = node.body if isinstance(node, ast.Lambda) else None
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id in ("bool", "int", "float"):
        return body.func.id
    return None


def read_env_names(envs: Path, keys: KeySet) -> Dict[str, str]:
    """The keys of envs.py's `env_variables` dict: the variables vllm-ascend reads; returns the types they show."""
    found: Dict[str, str] = {}
    for node in ast.walk(_parse(envs)):
        target: ast.expr
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "env_variables" and isinstance(value, ast.Dict):
            for name, reader in zip(map(_const, value.keys), value.values):
                if name:
                    keys.env.add(name)
                    kind = _lambda_type(reader)
                    if kind:
                        found[name] = kind
    return found


def _sources(package_dir: Path) -> List[Path]:
    """The package's modules, in a stable order, without its tests and never through a symlink."""
    return sorted(
        p for p in package_dir.rglob("*.py") if "tests" not in p.relative_to(package_dir).parts and not p.is_symlink()
    )


def installed_keys(package_dir: Path, version: str) -> KeySet:
    """The KeySet of the vllm_ascend package at `package_dir` (a venv's site-packages/vllm_ascend, or an sdist's)."""
    keys = KeySet(version=version)
    for name in ("ascend_config.py", "envs.py"):
        if not (package_dir / name).is_file():
            raise BadInput(
                f"the installed vllm-ascend {version} has no {name} under {package_dir}",
                hint="reinstall it ('ascend-setup install'); serve validates keys against that source",
            )
    types: Dict[str, Set[str]] = {}
    for source in _sources(package_dir):
        read_config_keys(source, keys, types)
    env_types = read_env_names(package_dir / "envs.py", keys)
    for env, key in keys.deprecated_env.items():
        if env in env_types:
            types.setdefault(key, set()).add(env_types[env])
    keys.types = {name: next(iter(kinds)) for name, kinds in types.items() if len(kinds) == 1}
    for key in list(keys.deprecated) + list(keys.removed):
        if key in keys.keys:  # read for real somewhere else too: still in use
            keys.removed.pop(key, None)
    return keys


def all_names(keys: KeySet) -> List[str]:
    """Every key, dotted sub-key and variable: what a misspelling is compared with."""
    return sorted(keys.keys | {f"{k}.{s}" for k, subs in keys.sub_keys.items() for s in subs} | keys.env)
