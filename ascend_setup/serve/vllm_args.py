"""Read a `vllm serve` command as vLLM 0.23.0 reads it: the rules of its `FlexibleArgumentParser` over the flags
of its real serve parser (data/vllm_serve_flags.json, generated from the vLLM 0.23.0 wheel by
dev/vllm_serve_flags.py), with Python's own argparse doing what argparse does in vLLM:

- `--served_model_name` is `--served-model-name` (underscores for dashes, up to the first `.`);
- `--additional-config.key=value` and `--additional-config.a.b value` are merged into one JSON object, added at
  the end of the command (a value is JSON, else a human-readable int like `80g`, else text; `key+` appends);
- `-O3` / `-O 3` is `--optimization-level 3`;
- a unique prefix is the flag (`--served-model foo`), an ambiguous or unknown one is refused with argparse's
  message; the last value of a flag wins; JSON flags take JSON (`--additional-config` also takes text that is no
  `{...}` object, as vLLM's `union_dict_and_str` does).

Stdlib only, and the flags passed in: the simulated host's stub vLLM embeds this file as its own parser.
"""

import argparse
import json
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

#: Shown of a value in an error: a 60,000-level JSON must not become the message.
SHOWN = 60


class ServeArgsError(Exception):
    """What vLLM's parser would exit 2 with (`vllm serve: error: ...`)."""


def _short(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def human_readable_int(value: str) -> int:
    """vLLM's: '1k' is 1,000, '1K' is 1,024, '25.6k' is 25,600; decimals refused with a binary suffix."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in "kmgt":
            return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
        try:
            factor: int = 2 ** (10 * ("KMGT".index(suffix) + 1))
            return int(number) * factor
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you "
                f"mean to use {number}{suffix.lower()} instead?"
            ) from None
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """vLLM's: -1 or 'auto' (vLLM picks the largest that fits), else a human-readable int."""
    return -1 if value.strip() in ("-1",) or value.strip().lower() == "auto" else human_readable_int(value)


def json_value(value: str) -> Any:
    """vLLM's `parse_type(json.loads)`; JSON nested too deeply for the parser is refused the same way (vLLM
    itself dies with a RecursionError traceback there)."""
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:
        why = " (nested too deeply)" if isinstance(exc, RecursionError) else ""
        raise argparse.ArgumentTypeError(f"Value {_short(value)} cannot be converted to JSON{why}.") from None


def json_or_str(value: str) -> Any:
    """vLLM's `union_dict_and_str`: a `{...}` is JSON, anything else stays text."""
    return json_value(value) if re.match(r"(?s)^\s*{.*}\s*$", value) else str(value)


def _typed(name: str, convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """vLLM's `parse_type`: a ValueError is argparse's 'invalid value' message; keeps the name argparse shows."""

    def parse(value: str) -> Any:
        try:
            return convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"Value {_short(value)} cannot be converted to {name}.") from None

    parse.__name__ = name
    return parse


CONVERTERS: Dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "json": json_value,
    "json_or_str": json_or_str,
    "human_int": _typed("human_readable_int", human_readable_int),
    "human_int_or_auto": _typed("human_readable_int_or_auto", human_readable_int_or_auto),
}


def _optional(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """vLLM's `optional_type`: '' and 'None' are None."""

    def parse(value: str) -> Any:
        return None if value in ("", "None") else convert(value)

    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


class _BooleanOptional(argparse.Action):
    """`--x` / `--no-x` (argparse's BooleanOptionalAction, which Python 3.8 lacks)."""

    def __init__(self, option_strings: Sequence[str], dest: str, default: Any = None, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Optional[str] = None,
    ) -> None:
        setattr(namespace, self.dest, not (option_string or "").startswith("--no-"))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise ServeArgsError(f"{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: Optional[str] = None) -> Any:
        raise ServeArgsError(f"{self.prog}: {message or 'exits there (--help or --version), serving nothing'}".strip())

    def _print_message(self, message: str, file: Any = None) -> None:
        """Nothing printed: `--help` would write vLLM's help onto serve's own output (its --json)."""


#: Marks a flag nobody gave (see `given_dests`).
UNSET = object()


_BUILT: Dict[Tuple[int, bool], Tuple[Sequence[Mapping[str, Any]], argparse.ArgumentParser]] = {}


def build_parser(flags: Sequence[Mapping[str, Any]], unset: bool = False) -> argparse.ArgumentParser:
    """`vllm` with its `serve` subcommand, as vLLM 0.23.0 defines them; `unset`: every default is UNSET. Built
    once per flag list (263 flags take milliseconds, and a command is read a dozen times)."""
    key = (id(flags), unset)
    if key not in _BUILT or _BUILT[key][0] is not flags:
        _BUILT[key] = (flags, _build(flags, unset))
    return _BUILT[key][1]


def _build(flags: Sequence[Mapping[str, Any]], unset: bool) -> argparse.ArgumentParser:
    top = _Parser(prog="vllm", description="vLLM CLI")
    serve = top.add_subparsers(dest="subparser").add_parser("serve", add_help=False)
    for flag in flags:
        convert = CONVERTERS[flag["type"]]
        if flag["optional"]:
            convert = _optional(convert)
        default = UNSET if unset else flag["default"]
        action = flag["action"]
        kwargs: Dict[str, Any] = {"dest": flag["dest"], "default": default}
        if action in ("store", "append"):
            kwargs.update(action=action, type=convert, nargs=flag["nargs"])
            if flag["choices"] is not None:
                kwargs["choices"] = [_choice(convert, c) for c in flag["choices"]]
        elif action == "store_const":
            kwargs.update(action=action, const=flag["const"])
        elif action == "boolean_optional":
            kwargs.update(action=_BooleanOptional)
        else:  # store_true, store_false, count, help, version
            kwargs["action"] = action
            if action in ("help", "version"):
                kwargs.pop("dest")
                kwargs["default"] = argparse.SUPPRESS
        if not flag["options"]:
            kwargs.pop("dest")
            serve.add_argument(flag["dest"], **kwargs)
        else:
            serve.add_argument(*flag["options"], **kwargs)
    return top


def _choice(convert: Callable[[str], Any], text: str) -> Any:
    try:
        return convert(text)
    except (ValueError, argparse.ArgumentTypeError):
        return text


def _nested(keys: List[str], value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def _update(into: Dict[str, Any], more: Dict[str, Any]) -> None:
    """vLLM's `recursive_dict_update`: dicts merge, lists extend, anything else is replaced."""
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _update(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] += value
        else:
            into[key] = value


def _dotted_value(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        try:
            return human_readable_int(text)
        except (ValueError, argparse.ArgumentTypeError):
            return text


def flexible(args: Sequence[str]) -> List[str]:
    """What `FlexibleArgumentParser.parse_args` hands argparse: dashes for underscores in flag names, `-O`,
    and every dotted flag merged into one JSON value per flag, added at the end."""
    names = re.compile(r"(?<=--)[^.]*")
    processed: List[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            key, eq, value = arg.partition("=")
            processed.append(names.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + eq + value)
        elif arg.startswith("-O") and arg != "-O":
            processed += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in ("0", "1", "2", "3"):
            processed.append("--optimization-level")
        else:
            processed.append(arg)
    out: List[str] = []
    dotted: Dict[str, Dict[str, Any]] = {}
    skip: Set[int] = set()
    for i, arg in enumerate(processed):
        if i in skip:
            continue
        if arg.startswith("-") and "." in arg:
            name, eq, text = arg.partition("=")
            if eq and "." not in name:
                out.append(arg)  # the '.' was only in the value
                continue
            if not eq:
                if i + 1 >= len(processed):
                    raise ServeArgsError(f"vllm: error: argument {name}: expected one argument")
                text = processed[i + 1]
                skip.add(i + 1)
            if name.endswith("+"):
                name, text = name[:-1], json.dumps(text.split(","))
            key, *keys = name.split(".")
            _update(dotted.setdefault(key, {}), _nested(keys, _dotted_value(text)))
            continue
        out.append(arg)
    for flag, merged in dotted.items():
        out += [flag, json.dumps(merged)]
    return out


def parse_serve(flags: Sequence[Mapping[str, Any]], args: Sequence[str], unset: bool = False) -> argparse.Namespace:
    """The namespace `vllm serve ARGS` gives (ARGS: the model, then the options); ServeArgsError as vLLM exits 2."""
    return build_parser(flags, unset).parse_args(["serve", *flexible(list(args))])


def given_dests(flags: Sequence[Mapping[str, Any]], args: Sequence[str]) -> Dict[str, Any]:
    """The settings `args` (options only, no model) make, by destination, whatever spelling made them."""
    found = vars(parse_serve(flags, list(args), unset=True))
    return {dest: value for dest, value in found.items() if value is not UNSET and dest != "subparser"}


def _option_of(token: str, options: Mapping[str, str]) -> Optional[str]:
    """The destination of the option `token` names, as argparse resolves it: exact, `--x=v`, or a unique prefix."""
    if not token.startswith("-"):
        return None
    name = token.split("=", 1)[0] if token.startswith("--") else token
    if name in options:
        return options[name]
    matches = (
        {options[o] for o in options if o.startswith("--") and o.startswith(name)} if token.startswith("--") else set()
    )
    return matches.pop() if len(matches) == 1 else None


def without(flags: Sequence[Mapping[str, Any]], args: Sequence[str], dest: str) -> Tuple[List[str], List[str]]:
    """(`args` as vLLM reads them with every occurrence of the one-value flag `dest` taken out, those occurrences).
    `args` must parse (the caller parsed them first)."""
    options = {o: f["dest"] for f in flags for o in f["options"]}
    rest: List[str] = []
    taken: List[str] = []
    processed = flexible(list(args))
    i = 0
    while i < len(processed):
        token = processed[i]
        if _option_of(token, options) == dest:
            width = 1 if "=" in token and token.startswith("--") else 2
            taken += processed[i : i + width]
            i += width
            continue
        rest.append(token)
        i += 1
    return rest, taken
