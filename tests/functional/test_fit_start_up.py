"""What a vLLM worker finds already in use on its card when it starts: the runtime's context and the idle card's own
use. The releases up to 0.14 count it out of the KV cache; later ones refuse a utilisation above the free rest.
`probe` measures it on this host (before its own tensors), and fit prefers that to the card table's figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.models import DENSE, make_model

from ascend_setup.fit.probe import run_probe
from ascend_setup.fit.profile import WORKER_CONTEXT
from ascend_setup.simulate.ecosystem import torch_files

GIB, MIB = 1024**3, 1024**2
#: The simulated world's NPU (simulate/ecosystem.py TORCH_TENSORS): a 910B4 as torch_npu shows it.
TOTAL, IDLE = 31662800896, 282 * MIB


def _probe_the_simulated_npu(where: Path) -> dict:
    """`probe`'s measurement of 2 x 64 MiB on the simulated world's torch, with an empty torch_npu beside it."""
    for name, text in torch_files("2.10.0", cuda=None).items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    (where / "torch_npu").mkdir()
    (where / "torch_npu" / "__init__.py").write_text("")
    return run_probe(Path(sys.executable), "npu:0", 64 * MIB, env={"PYTHONPATH": str(where)})


def _fit(cli, model: Path, workdir: Path, *extra: str) -> dict:
    return json.loads(cli("fit", str(model), "--json", "--no-calibration", "--workdir", str(workdir), *extra).stdout)


def _terms(fit: dict) -> dict:
    return {t["name"]: t for t in fit["memory_terms"]}


def test_probe_records_what_a_new_process_finds_in_use_before_its_own_tensors(tmp_path: Path) -> None:
    result = _probe_the_simulated_npu(tmp_path)
    assert result["total_memory"] == TOTAL
    assert result["in_use_memory"] == IDLE + WORKER_CONTEXT  # not the probe's own 2 x 64 MiB


def test_the_card_table_adds_the_idle_card_to_the_workers_context(cli, tmp_path: Path) -> None:
    """A 910B4 holds 282 MiB at idle inside its visible memory (npu-smi in vllm-ascend #5044): the releases that
    count the whole device take it out of the KV cache beside the worker's context."""
    model = make_model(tmp_path / "m", DENSE)
    old, new = (_fit(cli, model, tmp_path / "w", "--card", "910B4", *r) for r in (["--vllm-ascend", "0.11.0rc3"], []))
    term = _terms(old)["in use at start-up"]
    assert term["bytes"] == WORKER_CONTEXT + IDLE and term["in_budget"]
    assert "#5044" in term["source"] and "#9606" in term["source"]
    assert not _terms(new)["in use at start-up"]["in_budget"]  # 0.23 leaves it out of the KV cache


def test_fit_prefers_what_probe_measured_on_this_host(cli, tmp_path: Path) -> None:
    model = make_model(tmp_path / "m", DENSE)
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / "probe.json").write_text(
        json.dumps({"device": "npu:0", "gbps": 1267, "total_memory": TOTAL, "in_use_memory": 700 * MIB})
    )
    fit = _fit(cli, model, tmp_path / "wd", "--card", "910B4", "--vllm-ascend", "0.11.0rc3")
    term = _terms(fit)["in use at start-up"]
    assert term["bytes"] == 700 * MIB and "this host" in term["source"]
    table = _fit(cli, model, tmp_path / "none", "--card", "910B4", "--vllm-ascend", "0.11.0rc3")
    assert table["kv_available_bytes"] - fit["kv_available_bytes"] == 700 * MIB - (WORKER_CONTEXT + IDLE)


@pytest.mark.parametrize("utilisation, refused", [("0.97", False), ("0.98", True), ("0.99", True)])
def test_vllm_refuses_a_utilisation_above_what_is_free_when_a_worker_starts(
    cli, tmp_path: Path, utilisation: str, refused: bool
) -> None:
    """worker.py init_device (vllm-ascend 0.23): "Free memory on device ... on startup is less than desired GPU
    memory utilization". A 910B4 has 29.49 GiB visible, 0.66 GiB of it in use when a worker starts: 0.97 starts."""
    model = make_model(tmp_path / "m", DENSE)
    fit = _fit(cli, model, tmp_path / "w", "--card", "910B4", "--gpu-memory-utilization", utilisation)
    said = [b for b in fit["blockers"] if "refuses to start" in b]
    assert bool(said) is refused
    if refused:
        assert f"--gpu-memory-utilization {utilisation}" in said[0] and "0.97 or less starts" in said[0]
        assert "will not load" in fit["headline"]
    flags = ("--card", "910B4", "--gpu-memory-utilization", utilisation)
    old = _fit(cli, model, tmp_path / "w", *flags, "--vllm-ascend", "0.11.0rc3")
    assert not [b for b in old["blockers"] if "refuses to start" in b]  # 0.11 had no such check: it counts it


@pytest.mark.parametrize("value", ["-1", "\"much\"", "true", "1.5", str(TOTAL)])
def test_a_probed_in_use_figure_that_is_not_a_size_under_the_total_is_refused(cli, tmp_path: Path, value: str) -> None:
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / "probe.json").write_text(
        '{"device": "npu:0", "gbps": 1267, "total_memory": %d, "in_use_memory": %s}' % (TOTAL, value)
    )
    model = make_model(tmp_path / "m", DENSE)
    line = assert_one_line_error(cli("fit", str(model), "--workdir", str(tmp_path / "wd")))
    assert "in_use_memory" in line and "under its total_memory" in line


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("release", [(0, 11), (0, 12), (0, 13), (0, 14), (0, 15), (0, 16), (0, 17), (0, 23)])
def test_rank_0s_card_holds_the_other_workers_contexts_in_the_releases_that_made_them(tp: int, release: tuple) -> None:
    """vllm-ascend 0.13 to 0.16 import torch_npu._inductor before set_device (each sdist's worker.py): every other
    worker of the TP group makes a context on device 0, and vLLM sizes every rank's cache by rank 0's."""
    from ascend_setup.fit.cards import card_named
    from ascend_setup.fit.profile import FOREIGN_CONTEXT, Serving, in_use_at_start

    term = in_use_at_start(card_named("910B3"), tp, Serving(vllm_ascend=release))
    foreign = (0, 13) <= release <= (0, 16) and tp > 1
    assert term.bytes == WORKER_CONTEXT + IDLE + (tp - 1 if foreign else 0) * FOREIGN_CONTEXT
    assert ("#7107" in term.source) is foreign


def test_the_other_workers_contexts_lower_the_utilisation_that_starts(cli, tmp_path: Path) -> None:
    """0.16 no longer counts them out of the KV cache, but they are taken when rank 0 checks its free memory."""
    model = make_model(tmp_path / "m", DENSE)
    flags = ("--card", "910B3", "--tp", "8", "--gpu-memory-utilization", "0.98")
    assert not [b for b in _fit(cli, model, tmp_path / "w", *flags)["blockers"] if "refuses to start" in b]
    said = [b for b in _fit(cli, model, tmp_path / "w", *flags, "--vllm-ascend", "0.16")["blockers"] if "refuses" in b]
    assert said and "other 7 workers' contexts" in said[0] and "0.97 or less starts" in said[0]


def test_probes_document_and_line_carry_what_it_found_in_use(tmp_path: Path) -> None:
    """`probe --json` validates its result against its document (extra fields refused): the NPU's in-use figure
    is one of its fields, and the line says it."""
    from rich.console import Console

    from ascend_setup.commands.fit import NpuProbeDocument, ProbeCommandDocument, render_probe

    result = _probe_the_simulated_npu(tmp_path)
    document = ProbeCommandDocument.model_validate({**result, "saved": "probe.json"})
    assert isinstance(document.root, NpuProbeDocument) and document.root.in_use_memory == IDLE + WORKER_CONTEXT
    console = Console(record=True, width=80)
    render_probe(console, "npu:0", result, "probe.json")
    assert "29.49 GiB visible, 0.66 GiB of it in use when a process starts" in console.export_text()
