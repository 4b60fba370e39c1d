"""The install pipeline: the ordered steps `install`, `resume`, `status` and `--dry-run` share."""

from __future__ import annotations

from typing import List

from pydantic import BaseModel

from ascend_setup.engine.runlock import RunLock
from ascend_setup.engine.step import Step
from ascend_setup.engine.workdir import Workdir
from ascend_setup.steps.managed_python import InstallManagedPython
from ascend_setup.steps.mirror import ChooseMirror
from ascend_setup.steps.packages import CannPythonDeps, PluginDeps, TorchStack, Vllm
from ascend_setup.steps.plugin import VllmAscend
from ascend_setup.steps.preflight import Preflight
from ascend_setup.steps.resolve import Resolve
from ascend_setup.steps.triton import Triton
from ascend_setup.steps.venv import CreateVenv
from ascend_setup.steps.verify import Verify


def build_pipeline() -> List[Step[BaseModel]]:
    return [
        Preflight(),
        InstallManagedPython(),
        ChooseMirror(),
        Resolve(),
        CreateVenv(),
        CannPythonDeps(),
        TorchStack(),
        Vllm(),
        PluginDeps(),
        Triton(),
        VllmAscend(),
        Verify(),
    ]


def run_lock(workdir: Workdir) -> RunLock:
    """The workdir's run lock: one install (or resume, or demo) at a time."""
    return RunLock(workdir.run_lock, holder="ascend-setup run")
