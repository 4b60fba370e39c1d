"""Write ascend_setup/data/vllm_serve_flags.json from the real vLLM's `vllm serve` parser.

Run with the Python of a venv where vLLM is installed (a CPU-only machine will do: the flag definitions do not
depend on the platform, so the CPU platform is forced before the CLI is imported):

    VENV/bin/python dev/vllm_serve_flags.py ascend_setup/data/vllm_serve_flags.json

(a file, not stdout: vLLM logs to stdout as it is imported).

The live test (tests/e2e/test_serve_live.py) runs it against the vLLM 0.23.0 wheel and compares.
"""

import importlib.metadata
import json
import sys

ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_CountAction": "count",
    "_HelpAction": "help",
    "_VersionAction": "version",
    "BooleanOptionalAction": "boolean_optional",
    "LoRAParserAction": "store",
}
#: A value's type by the name of vLLM's converter; a closure (optional_type, parse_type) is unwrapped.
TYPES = {
    "str": "str",
    "int": "int",
    "float": "float",
    "loads": "json",
    "parse_dataclass": "json",
    "union_dict_and_str": "json_or_str",
    "human_readable_int": "human_int",
    "human_readable_int_or_auto": "human_int_or_auto",
    "<lambda>": "str",
}


def type_of(func):
    """(kind, optional): the converter's kind, and whether '' and 'None' give None (vLLM's optional_type)."""
    if func is None:
        return "str", False
    name = getattr(func, "__qualname__", type(func).__name__).split(".")[-1]
    if name in ("_optional_type", "_parse_type"):
        inner = func.__closure__[0].cell_contents
        kind, _ = type_of(inner)
        return kind, name == "_optional_type"
    return TYPES[name], False


def plain(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return None


def describe(parser):
    flags = []
    for action in parser._actions:
        kind, optional = type_of(getattr(action, "type", None))
        flags.append(
            {
                "options": list(action.option_strings),
                "dest": action.dest,
                "action": ACTIONS[type(action).__name__],
                "nargs": action.nargs,
                "const": plain(action.const),
                "type": kind,
                "optional": optional,
                "choices": [str(c) for c in action.choices] if action.choices is not None else None,
                "default": plain(action.default),
            }
        )
    return flags


def serve_parser():
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms._current_platform = CpuPlatform()
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    return top, ServeSubcommand().subparser_init(top.add_subparsers(required=False, dest="subparser"))


def main():
    _, serve = serve_parser()
    version = importlib.metadata.version("vllm")
    source = (
        f"vllm {version}: the parser of 'vllm serve' (vllm.entrypoints.cli.serve.ServeSubcommand), read by "
        "dev/vllm_serve_flags.py"
    )
    text = json.dumps(
        {"source": source, "vllm": version, "python": "%d.%d" % sys.version_info[:2], "flags": describe(serve)},
        indent=1,
    )
    with open(sys.argv[1], "w", encoding="utf-8") as handle:
        handle.write(text + "\n")


if __name__ == "__main__":
    main()
