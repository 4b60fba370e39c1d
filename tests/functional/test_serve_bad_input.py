"""Bad input to serve: exit 2, one line on stderr, JSON under --json, and nothing of the model directory written."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.serving import serving_venv

from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.model_dirs import build_model


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("serve-bad")
    return {
        "root": root,
        "cann": str(build_fake_cann(root / "Ascend").root),
        "venv": str(serving_venv(root)),
        "model": build_model(root / "models" / "dense", "dense"),
    }


def serve(cli, host: dict, model: Path, *extra: str):
    return cli(
        "serve",
        str(model),
        "--venv",
        host["venv"],
        "--workdir",
        str(host["root"] / "wd"),
        "--cann-home",
        host["cann"],
        *extra,
    )


def snapshot(model: Path) -> dict:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in model.iterdir()}


def test_a_model_directory_without_config_json(cli, host: dict, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    line = assert_one_line_error(serve(cli, host, bare))
    assert "has no config.json" in line
    assert list(bare.iterdir()) == []


def test_a_port_in_use(cli, host: dict) -> None:
    before = snapshot(host["model"])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = serve(cli, host, host["model"], "--port", str(port), "--json")
    line = assert_one_line_error(proc)
    assert f"--port {port} is in use" in line
    assert json.loads(proc.stdout)["exit"] == 2
    assert snapshot(host["model"]) == before


def test_more_cards_than_the_host_has(cli, host: dict) -> None:
    line = assert_one_line_error(serve(cli, host, host["model"], "--tp", "4"))
    assert "--tp 4 asks for more cards than npu-smi shows here (2)" in line


def test_a_context_the_kv_budget_cannot_hold_names_the_largest_that_fits(cli, host: dict) -> None:
    before = snapshot(host["model"])
    line = assert_one_line_error(serve(cli, host, host["model"], "--max-model-len", "40000", "--concurrency", "16"))
    assert "--max-model-len 40000 does not fit the KV budget at --concurrency 16: the largest that fits is" in line
    largest = int(line.split("the largest that fits is ")[1].split()[0])
    assert 10_000 < largest < 40_000
    assert snapshot(host["model"]) == before


def test_a_hub_id_that_was_never_fetched(cli, host: dict) -> None:
    line = assert_one_line_error(serve(cli, host, Path("Qwen/Qwen3-NotFetched")))
    assert "has not been fetched" in line and "model fetch" in line


def test_preflight_names_every_problem_at_once(cli, host: dict, tmp_path: Path) -> None:
    """A foreign process on the card (npu-smi), a download still in a .part file, no NNAL: one run, all three,
    exit 1, and nothing started (a shard shorter than its header is already exit 2, from fit's header check)."""
    cann = build_fake_cann(tmp_path / "Ascend", nnal=False)
    (cann.driver / "npu-processes").write_text("0 4242 python3 2944\n")
    model = build_model(tmp_path / "cut", "dense")
    (model / "tokenizer.json.part").write_bytes(b"{")
    proc = cli(
        "serve", str(model), "--venv", host["venv"], "--workdir", str(tmp_path / "wd"), "--cann-home", str(cann.root)
    )
    assert proc.returncode == 1, proc.stderr
    assert "3 problem(s)" in proc.stderr
    assert "card 0 is busy: npu-smi lists 4242 python3" in proc.stderr
    assert "tokenizer.json.part is a partial download" in proc.stderr
    assert "libatb.so is not resolvable" in proc.stderr
    assert not (tmp_path / "wd" / "serve").exists()
