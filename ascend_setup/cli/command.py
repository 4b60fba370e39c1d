"""The contract between the front door and a command: a frozen options model in, a `Result` out.

The front door parses the command line (every flag checked by its `type=` in `cli/flags.py`), builds the
command's options model from it once, calls `run(options, output)` and prints what comes back: the JSON
document under --json, the rendering otherwise. A command never reads `argparse.Namespace`, and a flag the
model does not declare (or a field no flag sets) fails the test generated over the parser.

The convention, for each command module:
- `class XOptions(Options)`: one field per flag (the parser's `dest`), set on the parser with
  `p.set_defaults(func=run, options=XOptions)`;
- `def run(options: XOptions, output: Output) -> Result`;
- `DOCUMENTS: Dict[str, Type[BaseModel]]`: for each command path ("triage", "serve status") the pydantic model of
  its --json document; `Result.document` is an instance of it, so the document keeps its schema by
  construction, and the manual's reference shows each schema, generated.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, Optional, Type, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.cli.render import Output, stdout_console

if TYPE_CHECKING:  # rich is imported by the rendering that uses it
    from rich.console import Console

#: What the front door itself sets on the namespace: not options of the command.
#: `after_dashes` names the option that takes what follows `--` on the command line (`serve MODEL -- ARGS`).
FRONT_DOOR: FrozenSet[str] = frozenset({"command", "func", "options", "after_dashes"})

O = TypeVar("O", bound="Options")


class Options(BaseModel):
    """A command's options, checked once and frozen: what every command takes, extended per command.

    Field names are the parser's `dest`s; `json` is spelled `json_output` here (pydantic's BaseModel has a
    `json` method), with the flag's name as its alias."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, populate_by_name=True)

    json_output: bool = Field(False, alias="json")
    matrix: Optional[Path] = None

    @classmethod
    def from_namespace(cls: Type[O], args: argparse.Namespace) -> O:
        """The options of one parsed command line (a `_name` is an action's own note, as `flags.Once` keeps)."""
        return cls.model_validate({k: v for k, v in vars(args).items() if k not in FRONT_DOOR and k[0] != "_"})


class LazyOptions:
    """An options model named by its module and class, imported when the command runs, not when its parser is
    built: a model built on a room's (install's on the recorded `InstallOptions`) would load that room, and its
    stacks, for `--help`."""

    def __init__(self, ref: str) -> None:
        self.ref = ref

    def model(self) -> Type[Options]:
        module, name = self.ref.split(":")
        found: Type[Options] = getattr(importlib.import_module(module), name)
        return found

    def from_namespace(self, args: argparse.Namespace) -> Options:
        return self.model().from_namespace(args)


def options_model(declared: Union[Type[Options], LazyOptions]) -> Type[Options]:
    """The options model a parser declares, imported if it was named lazily."""
    return declared.model() if isinstance(declared, LazyOptions) else declared


@dataclass(frozen=True)
class Result:
    """What a command returns: its exit code, its one JSON document, and how it reads on a terminal.

    `document` is printed under --json (a pydantic model as its JSON dump); `render` writes the human form to
    stdout's console otherwise. A command that printed as it went (a long run's progress) returns no render."""

    exit_code: int
    document: Any = None
    render: Optional[Callable[[Console], None]] = None


def emit(result: Result, output: Output) -> int:
    """Print a command's result as the command line asked, and give its exit code."""
    if output.json:
        if not output.printed:
            document = result.document
            if isinstance(document, BaseModel):
                document = document.model_dump(mode="json", by_alias=True)
            output.print_json(document)
    elif result.render is not None:
        result.render(stdout_console())
    return result.exit_code
