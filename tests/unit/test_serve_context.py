"""serve's context is data, read from the host in steps a test replaces: the plan and its refusals are tested
here without npu-smi, set_env.sh, a venv to run or a CANN on disk."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import pytest

from ascend_setup.commands.serve import ServeOptions
from ascend_setup.errors import BadInput
from ascend_setup.host.npu import NpuFacts
from ascend_setup.serve import prepare
from ascend_setup.serve.context import HostSteps, gather
from ascend_setup.serve.start_checks import VenvFacts
from ascend_setup.simulate.model_dirs import build_model


def no_host(chips: int = 1, venv: Optional[VenvFacts] = None) -> HostSteps:
    """No CANN, this process's environment, `chips` 910B3 cards on npu-smi, the packaged matrix's newest row."""

    def npu(home: Optional[str]) -> NpuFacts:
        return NpuFacts("npu-smi", [{"name": "910B3"} for _ in range(chips)])

    def read_venv(path: Path, env: Mapping[str, str]) -> Optional[VenvFacts]:
        return venv

    return dataclasses.replace(
        HostSteps(), cann=lambda home: None, npu=npu, venv=read_venv, bandwidth=lambda workdir: None
    )


def options(model: Path, tmp_path: Path, *extra: str, **given: object) -> ServeOptions:
    fields: Dict[str, object] = {"model": str(model), "workdir": str(tmp_path / "wd"), "dry_run": True, **given}
    return ServeOptions.model_validate({**fields, "vllm_args": list(extra)})


def test_a_dry_run_plans_from_a_context_built_without_the_host(tmp_path: Path) -> None:
    model = build_model(tmp_path / "dense", "dense")
    ctx = gather(options(model, tmp_path, "--max-num-seqs", "8"), no_host())
    composed, _ = prepare.plan(ctx)
    assert ctx.name == "dense" and ctx.cards == [0] and ctx.card.name.endswith("910B3") and ctx.facts is None
    assert composed.argv[1:3] == ["serve", str(model)] and "--max-num-seqs" in composed.argv
    assert prepare.validate(ctx, composed) == (False, [])  # no venv to read the plugin's keys from
    document = prepare.dry_run_document(ctx, composed, False, [], [])
    assert document["validated"] is False and "not validated" in str(document["note"])


def test_more_cards_than_npu_smi_shows_are_bad_input(tmp_path: Path) -> None:
    model = build_model(tmp_path / "dense", "dense")
    with pytest.raises(BadInput, match=r"--tp 2 asks for more cards than npu-smi shows here \(1\)"):
        gather(options(model, tmp_path, tp=2), no_host(chips=1))


def test_without_a_venv_only_a_dry_run_goes_on(tmp_path: Path) -> None:
    model = build_model(tmp_path / "dense", "dense")
    with pytest.raises(BadInput, match="is not a working venv"):
        gather(options(model, tmp_path, dry_run=False), no_host())


def test_the_triton_only_hints_are_dropped_where_triton_works(tmp_path: Path) -> None:
    model = build_model(tmp_path / "dense", "dense")
    facts = VenvFacts({"vllm": "0.23.0", "vllm-ascend": "0.23.0"}, None, True)
    ctx = gather(options(model, tmp_path), no_host(venv=facts))
    dropped: List[str] = [h.id for h in prepare.unneeded_hints(ctx)]
    assert dropped == [h.id for h in ctx.row.hints() if h.only_without_triton]
    assert ctx.plugin == "0.23.0"
