"""serve's sub-commands: `serve MODEL` is `serve start MODEL`, so a model directory named like a sub-command is
served when written as a path; `serve stop NAME` takes its NAME itself; what follows `--` is vllm serve's."""

from __future__ import annotations

import json
from typing import List

import pytest

from ascend_setup.cli.main import build_parser, main, pass_on, passed_through
from ascend_setup.cli.subcommands import in_order


def parsed(argv: List[str]) -> dict:
    ours, theirs = passed_through(argv)
    parser = build_parser(ours)
    args = parser.parse_args(in_order(parser, ours))
    if theirs is not None:
        pass_on(args, theirs)
    return {k: v for k, v in vars(args).items() if k in ("serve_command", "model", "name", "vllm_args")}


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["serve", "/m"], {"serve_command": "start", "model": "/m", "vllm_args": []}),
        (["serve", "./status"], {"serve_command": "start", "model": "./status", "vllm_args": []}),
        (["serve", "start", "status"], {"serve_command": "start", "model": "status", "vllm_args": []}),
        (["serve", "status"], {"serve_command": "status"}),
        (["serve", "stop"], {"serve_command": "stop", "name": None}),
        (["serve", "stop", "dense"], {"serve_command": "stop", "name": "dense"}),
        # options before MODEL or the sub-command, as serve took them before it had sub-commands
        (["serve", "--detach", "/m"], {"serve_command": "start", "model": "/m", "vllm_args": []}),
        (["serve", "--port", "8001", "./status"], {"serve_command": "start", "model": "./status", "vllm_args": []}),
        (["serve", "--json", "status"], {"serve_command": "status"}),
        (["serve", "--workdir", "/w", "stop", "dense"], {"serve_command": "stop", "name": "dense"}),
        (
            ["serve", "/m", "--port", "8001", "--", "--max-num-seqs", "64", "--port", "9"],
            {"serve_command": "start", "model": "/m", "vllm_args": ["--max-num-seqs", "64", "--port", "9"]},
        ),
    ],
)
def test_each_documented_spelling(argv: List[str], expected: dict) -> None:
    assert parsed(argv) == expected


@pytest.mark.parametrize(
    "argv, said",
    [
        (["serve", ""], "MODEL was given an empty value"),
        (["serve", "stop", " "], "NAME was given an empty value"),
        (["serve", "status", "--", "x"], "only 'serve MODEL' takes arguments after --"),
        (["serve", "stop", "a", "b"], "unrecognized arguments: b"),
    ],
)
def test_bad_input_names_the_argument(argv: List[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    cut = argv.index("--") if "--" in argv else len(argv)
    assert main([*argv[:cut], "--json", *argv[cut:]]) == 2
    assert said in json.loads(capsys.readouterr().out)["error"]
