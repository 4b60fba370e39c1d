"""The serve table is data checked by its models, the traits come from config.json, and the start-up phases and
the deadline come from the log and the weights' size."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.serve.families import families_for, load_table, traits
from ascend_setup.serve.run import MAX_SECONDS, deadline_seconds, phase_of
from ascend_setup.simulate.model_dirs import CONFIGS


def test_the_packaged_table_loads_and_every_trait_has_a_family() -> None:
    table = load_table()
    assert {f.trait for f in table.families} == {"dense", "vision", "moe", "hybrid", "mla", "modelslim"}
    assert {r.key for r in table.retired} >= {"torchair_graph_config", "ascend_scheduler_config"}


def test_a_table_with_a_bad_range_or_an_unknown_field_is_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("baseline: {}\nfamilies:\n  - {id: x, trait: dense, description: d, plugin: 'not a range'}\n")
    with pytest.raises(BadInput, match="not a version specifier"):
        load_table(bad)
    bad.write_text("baseline: {}\nfamilies:\n  - {id: x, trait: dense, description: d, colour: red}\n")
    with pytest.raises(BadInput, match="colour"):
        load_table(bad)


@pytest.mark.parametrize(
    "family, expected",
    [("dense", ["dense"]), ("vision", ["vision"]), ("moe", ["moe"]), ("hybrid", ["hybrid"]), ("mla", ["moe", "mla"])],
)
def test_traits_from_config(family: str, expected: list) -> None:
    assert traits(CONFIGS[family], has_quant_description=False) == expected


def test_version_ranges_and_card_counts_gate_the_families() -> None:
    moe = families_for(["moe"], "0.23.0", tp=2)[0]
    assert [a.args for a in moe.args if a.applies("0.23.0", 2)] == [
        ["--no-enable-prefix-caching"],
        ["--enable-expert-parallel"],
    ]
    assert [a.args for a in moe.args if a.applies("0.23.0", 1)] == [["--no-enable-prefix-caching"]]
    assert families_for(["modelslim"], "0.8.0", tp=1) == []  # the table's range: >=0.9.0
    graph = load_table().baseline.args[0]
    assert graph.applies("0.23.0", 1) and not graph.applies("0.20.0", 1)


def test_phases_are_read_from_vllms_own_lines() -> None:
    assert (
        phase_of("(EngineCore_DP0 pid=7) INFO [default_loader.py:262] Loading weights took 25.00 seconds")
        == "loading weights"
    )
    assert phase_of("(EngineCore_DP0 pid=7) INFO [monitor.py:34] torch.compile takes 26.20 s in total") == "compiling"
    assert phase_of("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 40%") == "capturing graphs"
    assert phase_of("(APIServer pid=1) INFO [on.py:62] Application startup complete.") == "starting the API server"
    assert phase_of("(APIServer pid=1) INFO some other line") is None


def test_the_deadline_scales_with_the_weights_and_is_capped() -> None:
    small, big = deadline_seconds(16 * 10**9, True), deadline_seconds(64 * 10**9, True)
    assert small == pytest.approx(32 + 300) and big > small and deadline_seconds(16 * 10**9, False) == small - 120
    assert deadline_seconds(10**13, True) == MAX_SECONDS
