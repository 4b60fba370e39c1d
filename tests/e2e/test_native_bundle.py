"""`bundle --glibc 2.31` reads the ELF of the wheels it fetched: a stub wheel tagged manylinux_2_28 whose library
needs GLIBC_2.34 is named, before an air-gapped site installs it."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import clean_env
from helpers.stack import ROW

from ascend_setup.simulate.native_stubs import compiler
from ascend_setup.simulate.world import start_simulated_host

#: The toolchain builds the library (and the glibc 2.31 root runs this file too).
pytestmark = [pytest.mark.userland, pytest.mark.skipif(compiler() is None, reason="no C compiler")]


def test_bundle_names_the_wheel_whose_library_needs_a_newer_glibc_than_its_tag(tmp_path: Path) -> None:
    host = start_simulated_host(tmp_path / "world", ROW, tool_dependencies=True, understated=("einops",))
    try:
        home = tmp_path / "home"
        home.mkdir()
        argv = [
            sys.executable,
            "-m",
            "ascend_setup",
            "bundle",
            "--cann",
            "9.1.0",
            "--arch",
            platform.machine(),
            "--glibc",
            "2.31",
            "--python",
            "%d.%d" % sys.version_info[:2],
            *host.index_args(),
            "--tool-index-url",
            host.tools.url,
            "-o",
            str(tmp_path / "bundle"),
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, env=clean_env(home), timeout=900)
    finally:
        host.close()
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    named = [line for line in proc.stderr.splitlines() if "needs GLIBC_" in line]
    assert named == [
        f"einops-0.1-py3-none-manylinux_2_28_{platform.machine()}.whl: tagged for glibc 2.28, but "
        "einops/_native.so needs GLIBC_2.34 (read from its ELF); the target's glibc 2.31 cannot load "
        "it: build that package from source for it"
    ], proc.stderr[-3000:]
    assert (tmp_path / "bundle" / "files" / f"einops-0.1-py3-none-manylinux_2_28_{platform.machine()}.whl").is_file()
