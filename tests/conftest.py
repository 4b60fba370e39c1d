"""Shared fixtures: a CLI runner in a clean environment, the live marker, fake CANN trees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/helpers as `helpers`

from helpers.cli import clean_env  # after the path it needs


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live", action="store_true", help="run tests that talk to the real public index")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    if "soak" not in (config.option.markexpr or ""):
        skip_soak = pytest.mark.skip(reason="the SIGKILL soak (minutes); run with -m soak, as .ci/run does")
        for item in items:
            if "soak" in item.keywords:
                item.add_marker(skip_soak)
    if config.getoption("--live"):
        return
    skip = pytest.mark.skip(reason="talks to the real package index; run with --live")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def cli(home: Path):
    """Run `python -m ascend_setup ARGS` as a user would; returns the CompletedProcess."""

    def run(
        *args: str, env: Optional[Dict[str, str]] = None, timeout: float = 600, cwd: Optional[Path] = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ascend_setup", *args],
            capture_output=True,
            text=True,
            env=clean_env(home, env),
            timeout=timeout,
            cwd=cwd,
        )

    return run
