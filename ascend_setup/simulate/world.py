"""A simulated Ascend host: loopback indexes (main, Ascend, PyTorch CPU) serving stub distributions with
the real names, versions and requirements of the 9.1.0 stack, and a fake CANN 9.1.0 tree with a driver,
npu-smi and NNAL. `ascend-setup demo` and the test suite use this same world, so they cannot drift apart.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ascend_setup.errors import AscendSetupError, StepFailed
from ascend_setup.host.interpreters import choose_interpreter
from ascend_setup.matrix.models import Row
from ascend_setup.simulate.ecosystem import PLUGIN_REQUIRES, Ecosystem, build_ecosystem
from ascend_setup.simulate.fake_cann import FakeCann, build_fake_cann
from ascend_setup.simulate.index_server import Behaviour, LocalIndex
from ascend_setup.simulate.native_stubs import plugin_extension
from ascend_setup.simulate.stub_plugin import build_stub_plugin_sdist
from ascend_setup.simulate.third_party import ArchiveServer, build_stub_archives
from ascend_setup.utils.procs import capture

#: The stub vllm-ascend sdist carries this much incompressible padding, so its download takes a moment.
SDIST_PADDING = 3 * 1024 * 1024


@dataclass
class SimulatedHost:
    """The three indexes (started) and the fake CANN tree; `close()` stops the servers."""

    root: Path
    main: LocalIndex
    ascend: LocalIndex
    pytorch_cpu: LocalIndex
    cann: FakeCann
    eco: Ecosystem  # the files each index serves
    archives: ArchiveServer  # the operator build's third-party archives (their origin, as the sdist names it)
    tools: Optional[LocalIndex] = None  # the tool's own dependencies (`bundle --tool-index-url`), when asked for

    def index_args(self) -> List[str]:
        return [
            "--index-url",
            self.main.url,
            "--index",
            f"ascend={self.ascend.url}",
            "--index",
            f"pytorch-cpu={self.pytorch_cpu.url}",
        ]

    def close(self) -> None:
        for index in (self.main, self.ascend, self.pytorch_cpu, self.archives, self.tools):
            if index is not None:
                index.close()

    def __enter__(self) -> SimulatedHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def venv_python_for(row: Row) -> str:
    """The interpreter a simulated install's venv uses: this one when the row allows it, else another in the
    row's range, up to 3.11 when there is one: vllm's real metadata wants setuptools>=77 on Python > 3.11,
    which no ensurepip has (3.12's has none)."""
    if row.python_allows("%d.%d.%d" % sys.version_info[:3]):
        return sys.executable
    try:
        return choose_interpreter(f"{row.python},<3.12").path
    except AscendSetupError:
        return choose_interpreter(row.python).path


def venv_tools_for(row: Row) -> Optional[Path]:
    """Where the simulated index's real pip and setuptools wheels come from: None (this interpreter's
    ensurepip) when the row allows this interpreter, else the ensurepip of the venvs' one (Python 3.8's
    setuptools 56 is too old for what the simulated stack's metadata asks)."""
    python = venv_python_for(row)
    return None if python == sys.executable else ensurepip_wheels(python)


def ensurepip_wheels(python: str) -> Path:
    """The directory of the pip and setuptools wheels `python` seeds its venvs with."""
    out = capture([python, "-c", "import ensurepip, os; print(os.path.dirname(ensurepip.__file__))"], timeout=60)
    if out.returncode != 0:
        raise StepFailed(f"{python} has no ensurepip: {out.stderr.strip()[-200:]}")
    return Path(out.stdout.strip()) / "_bundled"


def start_simulated_host(
    root: Path,
    row: Row,
    *,
    plugin_wheel_arches: Sequence[str] = ("aarch64",),
    plugin_wheel_glibc: str = "2.34",
    triton_pythons: Sequence[str] = ("cp311",),
    behaviour: Optional[Behaviour] = None,
    cann_version: str = "9.1.0",
    tool_dependencies: bool = False,
    native_needs: bool = False,
    understated: Sequence[str] = (),
    tls: Optional[Tuple[Path, Path]] = None,
) -> SimulatedHost:
    """Build the world under `root` and start its indexes on 127.0.0.1 (`tool_dependencies`: a fourth index
    serves the tool's own dependencies, for `bundle --tool-index-url`; `tls`: a certificate chain and key every
    server of the world answers HTTPS with, e.g. one signed by a site CA only the system store holds;
    `native_needs`: the vllm_ascend_C the sdist builds needs NNAL's libatb.so and its runtime symbol, which only
    CANN's environment resolves (native_stubs; without a C compiler it needs nothing)); `understated`: stubs whose
    manylinux_2_28 wheels hold a library that needs GLIBC_2.34 (build_ecosystem)."""
    archives = ArchiveServer(root / "third-party", tls=tls)
    sdist = build_stub_plugin_sdist(
        root / "sdist",
        row.packages["vllm-ascend"],
        PLUGIN_REQUIRES,
        padding_bytes=SDIST_PADDING,
        third_party=build_stub_archives(root / "third-party", archives.url),
        extension=plugin_extension(cann_version) if native_needs else None,
    )
    eco = build_ecosystem(
        root / "eco",
        dict(row.packages),
        dict(row.cann_python_deps),
        vllm_ascend_sdist=sdist,
        plugin_wheel_arches=plugin_wheel_arches,
        plugin_wheel_glibc=plugin_wheel_glibc,
        triton_pythons=triton_pythons,
        venv_tools=venv_tools_for(row),
        understated=understated,
    )
    main, ascend, pytorch_cpu = LocalIndex(behaviour, tls=tls), LocalIndex(tls=tls), LocalIndex(tls=tls)
    tools = None
    if tool_dependencies:
        from ascend_setup.simulate.tool_deps import build_tool_index

        tools = LocalIndex(tls=tls)
        for wheel in build_tool_index(root / "tools"):
            tools.add(wheel)
    main.add_dir(eco.main)
    ascend.add_dir(eco.ascend)
    pytorch_cpu.add_dir(eco.pytorch_cpu)
    cann = build_fake_cann(root / "Ascend", version=cann_version, set_env_mode="hostile", native_libatb=native_needs)
    return SimulatedHost(
        root=root, main=main, ascend=ascend, pytorch_cpu=pytorch_cpu, cann=cann, eco=eco, archives=archives, tools=tools
    )
