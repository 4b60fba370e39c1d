"""A command's --help is its parser only: what the command runs with is imported when it runs, so `COMMAND
--help` answers as quickly as `pip install --help` (benchmarks/help_speed.py times both in one run; a test
holds what loads, not the clock). Read from sys.modules of a real `ascend-setup COMMAND --help`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from helpers.cli import clean_env

from ascend_setup.cli.main import COMMANDS

#: What `--help` may load of the package: the front door, the leaves, the one exception family, and the
#: command's own module. pydantic, for the command's options model, is allowed.
PARSER_ROOMS = re.compile(r"ascend_setup(\.(cli|utils)(\..+)?|\.errors|\.commands(\..+)?)?")
#: The stacks a run needs and a parser does not: drawing, HTTP, the matrix's YAML, the hubs, retries, versions.
RUN_STACKS = ("rich", "requests", "urllib3", "yaml", "huggingface_hub", "tenacity", "packaging")
#: Commands whose parser still needs a room, and why.
NOT_YET = {
    "container": "--runtime's choices are container/run_command's RUNTIMES, which loads the matrix",
    "doctor": "its --node-facts document is the nodes room's NodeFacts (which loads host/ and matrix/)",
    "matrix": "its check document holds the matrix room's RowCheck (matrix/check.py)",
    "fleet": "its report document holds the fleet room's Finding (fleet/merged_report.py)",
}


#: The front door as the console script runs it, then every module loaded by the time --help has printed.
CHILD = (
    "import json, sys\n"
    "from ascend_setup.cli.main import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
)


def loaded(home: Path, command: str) -> List[str]:
    argv = [sys.executable, "-c", CHILD, command, "--help"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=clean_env(home), timeout=120)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]
    modules: List[str] = json.loads(proc.stderr)
    return modules


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - set(NOT_YET)))
def test_help_loads_the_parser_only(home: Path, command: str) -> None:
    modules = loaded(home, command)
    assert f"ascend_setup.commands.{COMMANDS[command][0]}" in modules  # the command's parser was built
    rooms = [m for m in modules if m.startswith("ascend_setup") and not PARSER_ROOMS.fullmatch(m)]
    stacks = [m for m in modules if m.split(".")[0] in RUN_STACKS]
    assert rooms == [] and stacks == []


def test_not_yet_is_not_stale() -> None:
    assert set(NOT_YET) <= set(COMMANDS)
