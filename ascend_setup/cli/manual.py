"""The manual's generated pages: the command line from the parser itself (every command with its options, and
the schema of its --json document), and the matrix file's schema from its pydantic models. docs/hooks.py puts
them into the pages at build time, so the reference cannot drift from the code; a test holds every command,
option and document to appearing."""

from __future__ import annotations

import argparse
import importlib
import json
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Tuple, Type

from ascend_setup.cli.main import COMMANDS, build_parser

if TYPE_CHECKING:
    from pydantic import BaseModel


def _cell(text: str) -> str:
    """Table-safe text: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    try:  # what --help prints, %(default)s and the like expanded
        return parser._get_formatter()._expand_help(action)  # argparse has no public form of it
    except (KeyError, TypeError, ValueError):
        return str(action.help)


def commands(
    parser: argparse.ArgumentParser, words: Tuple[str, ...] = ()
) -> Iterator[Tuple[Tuple[str, ...], str, argparse.ArgumentParser]]:
    """(the words that name it, its one line, its parser) of every command and sub-command, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*words, name), helps.get(name, ""), sub
                yield from commands(sub, (*words, name))


def options(parser: argparse.ArgumentParser) -> List[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.option_strings and a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
    ]


def _option_row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    value = ""
    if action.nargs != 0:
        value = (
            f"`{action.metavar or action.dest.upper()}`"
            if not action.choices
            else " \\| ".join(f"`{c}`" for c in action.choices)
        )
    text = _help(parser, action) + (" (required)" if action.required else "")
    return f"| {names} | {value} | {_cell(text)} |"


def cli_reference() -> str:
    """Every command of `ascend-setup`, its usage and its options, as Markdown."""
    top = build_parser(full=True)
    lines = [
        "## `ascend-setup`",
        "",
        _cell(top.description or ""),
        "",
        "```text",
        top.format_usage().strip(),
        "```",
        "",
        _cell(top.epilog or ""),
        "",
    ]
    for words, line, parser in commands(top):
        lines += [
            f"## `ascend-setup {' '.join(words)}`",
            "",
            _cell(line),
            "",
            "```text",
            parser.format_usage().strip(),
            "```",
            "",
        ]
        positionals = [
            a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
        ]
        rows = [f"| `{a.metavar or a.dest}` | | {_cell(_help(parser, a))} |" for a in positionals]
        rows += [_option_row(parser, a) for a in options(parser)]
        if rows:
            lines += ["| argument | value | what it does |", "|---|---|---|", *rows, ""]
        for path, model in documents().items():
            if command_words(path) == " ".join(words):
                lines += document_reference(path, model)
    return "\n".join(lines)


def documents() -> Dict[str, Type[BaseModel]]:
    """Every --json document's model by its command path ("matrix show", "doctor --nodes"): each command
    module's `DOCUMENTS`, found through the front door's table, so a command that declares them joins."""
    found: Dict[str, Type[BaseModel]] = {}
    for module in dict.fromkeys(module for module, _ in COMMANDS.values()):
        found.update(getattr(importlib.import_module(f"ascend_setup.commands.{module}"), "DOCUMENTS", {}))
    return found


def command_words(path: str) -> str:
    """A document's command, its flags aside: "doctor --nodes" -> "doctor"."""
    return path.split(" --", 1)[0]


def document_reference(path: str, model: Type[BaseModel]) -> List[str]:
    """The --json document of `ascend-setup PATH`: its fields, then each object it nests, field by field."""
    schema = model.model_json_schema()
    defs: Dict[str, Any] = schema.get("$defs", {})
    lines = _model_table(f"`ascend-setup {path} --json`", schema, defs, level=3, link=False)
    for name in sorted(defs):
        lines += _model_table(f"`{name}` (in `{path} --json`)", defs[name], defs, level=4, link=False)
    return lines


def _type_of(schema: Dict[str, Any], defs: Dict[str, Any], link: bool = True) -> str:
    """A field's type in words; a nested model by name, linked to its table where the page has one of each."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})" if link else f"`{name}`"
    if "anyOf" in schema:
        return " or ".join(_type_of(s, defs, link) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])  # a table cell escapes the pipes
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type_of(schema.get('items', {}), defs, link)}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"mapping to {_type_of(schema['additionalProperties'], defs, link)}"
    return str(kind)


def _default(value: Any) -> str:
    """A default as JSON spells it (null, true, ""), a plain string as itself."""
    return value if isinstance(value, str) and value else json.dumps(value)


def _model_table(
    name: str, schema: Dict[str, Any], defs: Dict[str, Any], *, level: int = 3, link: bool = True
) -> List[str]:
    required = set(schema.get("required", []))
    lines = [f"{'#' * level} {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    props = schema.get("properties", {})
    if not props:
        return lines + [f"{_type_of(schema, defs, link)}", ""]
    lines += ["| field | type | required | default |", "|---|---|---|---|"]
    for field, spec in props.items():
        default = "" if "default" not in spec else f"`{_default(spec['default'])}`"
        kind, needed = _cell(_type_of(spec, defs, link)), "yes" if field in required else ""
        lines.append(f"| `{field}` | {kind} | {needed} | {_cell(default)} |")
    return lines + [""]


def matrix_schema() -> str:
    """The matrix file's models (ascend_setup/matrix/models.py), field by field, as Markdown."""
    from ascend_setup.matrix.models import Matrix

    schema = Matrix.model_json_schema()
    defs: Dict[str, Any] = schema.get("$defs", {})
    lines = _model_table("Matrix", schema, defs)
    for name in sorted(defs):
        lines += _model_table(name, defs[name], defs)
    return "\n".join(lines)
