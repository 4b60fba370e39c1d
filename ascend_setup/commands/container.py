"""`ascend-setup container run-command`: the `docker run` this host needs for vLLM-Ascend, printed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Type

from pydantic import BaseModel

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.documents import Document
from ascend_setup.cli.render import Output, stderr_console
from ascend_setup.container.run_command import RUNTIMES, RunCommand, Runtime, compose
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.utils.paths import check_dir_path, root_dir

if TYPE_CHECKING:
    from rich.console import Console


class RunCommandOptions(Options):
    container_command: str
    cards: Optional[str] = None
    runtime: Runtime = "docker"
    image: Optional[str] = None
    cache: str = "~/.cache"
    cann: Optional[str] = None
    root: Optional[str] = None
    run_root_tools: bool = False


class RunCommandDocument(Document):
    """`container run-command --json`: the command as one pasteable text and as argv, the cards and image it
    gives, the driver files this host lacks (`missing`: left out of the command) and notes."""

    runtime: Runtime
    cards: List[int]
    device_type: Optional[str]
    image: str
    row: str
    lines: List[str]
    missing: List[str]
    notes: List[str]
    command: str
    argv: List[str]


DOCUMENTS: Dict[str, Type[BaseModel]] = {"container run-command": RunCommandDocument}


def run_command(options: RunCommandOptions, output: Output) -> Result:
    cache = Path(options.cache).expanduser().absolute()
    check_dir_path(cache, "--cache", mode="read")
    matrix = load_matrix(options.matrix)
    row = select_row(matrix, options.cann) if options.cann else matrix.newest()
    command = compose(
        root_dir(options.root),
        row,
        cards=options.cards,
        runtime=options.runtime,
        image=options.image,
        cache=cache,
        run_tools=options.run_root_tools,
    )
    return Result(0, RunCommandDocument.model_validate(command.to_json()), lambda console: render(console, command))


def render(console: Console, command: RunCommand) -> None:
    for note in command.notes:
        stderr_console().print(f"note: {note}", soft_wrap=True, markup=False)
    console.print(command.text(), soft_wrap=True, markup=False, highlight=False)


def container_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="container_command", metavar="run-command")
    sub.required = True
    r = sub.add_parser(
        "run-command",
        help="print the docker run (or nerdctl, or Ascend Docker Runtime) command "
        "this host needs for vLLM-Ascend; starts nothing",
    )
    flags.common(r)
    r.add_argument(
        "--cards",
        metavar="LIST",
        help="the cards to give the container, e.g. 0,1 or 0-3 (default: every /dev/davinciN of this host)",
    )
    r.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default="docker",
        help="docker (default), nerdctl, or ascend-docker-runtime (ASCEND_VISIBLE_DEVICES instead of --device)",
    )
    r.add_argument(
        "--image",
        metavar="IMAGE",
        help="the image (default: the row's vllm-ascend image for this host's card: A2, A3, 310P)",
    )
    r.add_argument(
        "--cache",
        metavar="DIR",
        default="~/.cache",
        help="the host directory kept across containers as /root/.cache (models, compiled kernels; default ~/.cache)",
    )
    flags.cann(p=r, help="the row whose vllm-ascend image to use (default: the newest)")
    flags.root(
        r,
        "read this directory as the host's / for its cards and driver files (default /); its "
        "binaries run only with --run-root-tools",
    )
    flags.run_root_tools(r)
    r.set_defaults(func=run_command, options=RunCommandOptions)


ARGUMENTS = {"container": container_arguments}
