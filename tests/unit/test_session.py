"""The install session's typed step outputs read what the previous release's state.json recorded."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.session import session_for

from ascend_setup.steps.outputs import HostFacts, LockRef, MirrorChoice
from ascend_setup.steps.pipeline import build_pipeline
from ascend_setup.steps.preflight import Preflight

OLD_STATE = Path(__file__).resolve().parents[1] / "data" / "state" / "state-0.json"


def test_every_recorded_output_loads_into_its_steps_model(tmp_path: Path) -> None:
    recorded = json.loads(OLD_STATE.read_text())["steps"]
    assert {s.name for s in build_pipeline()} - set(recorded) == {"python"}  # a step that release did not have
    outputs = {step.name: step.output_of(recorded.get(step.name, {}).get("outputs")) for step in build_pipeline()}
    assert all(isinstance(outputs[s.name], s.Output) for s in build_pipeline())
    session = session_for(tmp_path, outputs)
    facts = session.get(Preflight)
    assert isinstance(facts, HostFacts) and facts.python_version == "@PYTHON_VERSION@" and facts.glibc == "@GLIBC@"
    assert session.find(MirrorChoice).indexes.index_url == "@MAIN@"
    assert session.find(LockRef).lock.startswith("@WORKDIR@/lock/") and session.soc == "ascend910b3"


def test_an_unknown_glibc_is_the_manylinux_floor(tmp_path: Path) -> None:
    facts = HostFacts(
        python="python3",
        python_version="3.11.7",
        cann_version="9.1.0",
        cann_toolkit="",
        cann_root="",
        arch="aarch64",
        glibc=None,
    )
    assert facts.target.glibc == "2.17" and facts.target.python == "3.11"
    assert session_for(tmp_path, {"preflight": facts}, soc="ascend910_9392").device == "A3"
