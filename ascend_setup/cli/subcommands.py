"""Sub-commands with a default: `serve MODEL` is `serve start MODEL`, while `serve status` and `serve stop NAME`
are sub-commands of their own.

A first word that names no sub-command goes, whole, to the default one: so a model directory named like a
sub-command is served when it is written as a path (`serve ./status`) or after the default's name
(`serve start status`), and every earlier spelling keeps working."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

if TYPE_CHECKING:  # generic only to the type checker (not at run time before Python 3.9)
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    SubParsers = argparse._SubParsersAction


class _AnyWord(Dict[str, argparse.ArgumentParser]):
    """The sub-parsers by name, where every word passes argparse's choice check once the sub-commands are
    added (the action routes it); while they are added, a name given twice is still refused."""

    routing = True

    def __contains__(self, word: object) -> bool:
        return self.routing or super().__contains__(word)


class DefaultSubcommand(SubParsers):
    """A first word that names no sub-command is the first argument of `default_command` (see `add_subcommands`)."""

    default_command = ""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._name_parser_map: _AnyWord = _AnyWord()
        self.choices = self._name_parser_map

    def add_parser(self, name: str, **kw: Any) -> argparse.ArgumentParser:
        self._name_parser_map.routing = False
        try:
            parser: argparse.ArgumentParser = super().add_parser(name, **kw)
            return parser
        finally:
            self._name_parser_map.routing = True

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Union[str, Sequence[Any], None],
        option_string: Optional[str] = None,
    ) -> None:
        words = list(values or [])
        if words and not dict.__contains__(self._name_parser_map, words[0]):
            words = [self.default_command, *words]
        super().__call__(parser, namespace, words, option_string)


def add_subcommands(parser: argparse.ArgumentParser, *, dest: str, metavar: str, default: str) -> SubParsers:
    """`parser`'s sub-commands, `default` taking a first word that names none of them; required."""
    sub = parser.add_subparsers(dest=dest, metavar=metavar, action=DefaultSubcommand)
    assert isinstance(sub, DefaultSubcommand)
    sub.default_command = default
    sub.required = True
    return sub


def in_order(parser: argparse.ArgumentParser, argv: List[str]) -> List[str]:
    """A command line (`COMMAND WORDS...`) as `parser` takes it: for a command whose sub-command has a default
    (`add_subcommands`), options written before the sub-command are moved behind it (`options_first`)."""
    commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    command = commands.choices.get(argv[0]) if commands is not None and argv else None
    chooser = next((a for a in command._actions if isinstance(a, DefaultSubcommand)), None) if command else None
    if chooser is None:
        return argv
    others = [name for name in dict.keys(chooser.choices) if name != chooser.default_command]
    return [argv[0], *options_first(argv[1:], chooser.default_command, others)]


def options_first(words: List[str], default: str, others: Sequence[str]) -> List[str]:
    """A command's words after its name, with options written before the sub-command (`serve --detach MODEL`,
    `serve --json status`) moved behind it, as a parser without sub-commands took them: the first word naming
    another sub-command is that sub-command; else the words go to the default one. `-h`/`--help` first is the
    command's own help."""
    if not words or not words[0].startswith("-") or words[0] in ("-h", "--help", "--"):
        return words
    cut = words.index("--") if "--" in words else len(words)
    for i, word in enumerate(words[:cut]):
        if word in others:
            return [word, *words[:i], *words[i + 1 :]]
    return [default, *words]
