"""Shared fixtures: a CLI runner in a clean environment, the live marker, fake CANN trees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live", action="store_true", help="run tests that talk to the real public index")


#: The test files whose outcome the OS's userland can change: glibc and its wheel tags, the Python build,
#: venv and ensurepip, the trust store, the toolchain, tmpfs and disk, the system's interpreters, and the
#: README's first command. `.ci/glibc-2.31` runs these (marked `userland`) inside the Debian 11 root; the
#: rest is the tool's own logic (parsers, renderers, the kill and signal loops, the generated bad-input
#: table), the same on any glibc, and runs once, on the host.
USERLAND = ("test_tls.py", "test_pythons.py", "test_host.py", "test_index.py", "test_sourcebuild.py",
            "test_distcheck.py", "test_tempdirs.py", "e2e/test_install.py", "e2e/test_source_build.py",
            "e2e/test_diskfull.py", "e2e/test_demo.py", "e2e/test_indexes.py", "e2e/test_derive.py",
            "e2e/test_login.py")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    for item in items:
        if item.path.relative_to(tests).as_posix() in USERLAND:
            item.add_marker(pytest.mark.userland)
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


def clean_env(home: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """An environment free of the developer's pip and ascend-setup settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "ASCEND_", "UV_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update({"HOME": str(home), "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "200"})
    env.update(extra or {})
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def cli(home: Path):
    """Run `python -m ascend_setup ARGS` as a user would; returns the CompletedProcess."""

    def run(*args: str, env: Optional[Dict[str, str]] = None, timeout: float = 600,
            cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ascend_setup", *args], capture_output=True, text=True,
                              env=clean_env(home, env), timeout=timeout, cwd=cwd)

    return run


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """Bad input: the given exit code, exactly one line on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
