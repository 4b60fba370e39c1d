"""`ascend-setup container run-command`: the `docker run` this host needs for vLLM-Ascend, printed."""

from __future__ import annotations

import argparse
from pathlib import Path

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, stderr_console, stdout_console
from ascend_setup.utils.paths import check_dir_path, root_dir


def run_command(args: argparse.Namespace, output: Output) -> int:
    from ascend_setup.container.run_command import compose
    from ascend_setup.matrix import load_matrix, select_row

    cache = Path(args.cache).expanduser().absolute()
    check_dir_path(cache, "--cache", mode="read")
    matrix = load_matrix(args.matrix)
    row = select_row(matrix, args.cann) if args.cann else matrix.newest()
    command = compose(
        root_dir(args.root),
        row,
        cards=args.cards,
        runtime=args.runtime,
        image=args.image,
        cache=cache,
        run_tools=args.run_root_tools,
    )
    if args.json:
        output.print_json(command.to_json())
        return 0
    for note in command.notes:
        stderr_console().print(f"note: {note}", soft_wrap=True, markup=False)
    stdout_console().print(command.text(), soft_wrap=True, markup=False, highlight=False)
    return 0


def container_arguments(p: argparse.ArgumentParser) -> None:
    from ascend_setup.container.run_command import RUNTIMES

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
    r.set_defaults(func=run_command)


ARGUMENTS = {"container": container_arguments}
