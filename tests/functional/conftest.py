"""Fixtures of the functional tier: the stub 9.1.0 stack on three loopback indexes, shared by a module."""

from __future__ import annotations

import pytest

from ascend_setup.matrix import load_matrix
from ascend_setup.simulate.ecosystem import build_ecosystem
from ascend_setup.simulate.index_server import LocalIndex
from ascend_setup.simulate.world import venv_tools_for

ROW = load_matrix().rows["9.1.0"]


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    eco = build_ecosystem(
        tmp_path_factory.mktemp("eco"), dict(ROW.packages), dict(ROW.cann_python_deps), venv_tools=venv_tools_for(ROW)
    )
    main, ascend, torch_cpu = LocalIndex(), LocalIndex(), LocalIndex()
    main.add_dir(eco.main)
    ascend.add_dir(eco.ascend)
    torch_cpu.add_dir(eco.pytorch_cpu)
    yield main, ascend, torch_cpu, eco
    for index in (main, ascend, torch_cpu):
        index.close()
