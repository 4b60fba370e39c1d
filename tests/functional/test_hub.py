"""fit on a hub id and model fetch, against both hubs' APIs served on 127.0.0.1 (tests/helpers/hub_server.py):
the same figures as fit on the files on disk, no weight byte read, a second fit offline, a fetch that
survives SIGKILLs and catches a corrupted file, and one refused before its first weight byte."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import REPO, clean_env
from helpers.hub_server import HubBehaviour, LocalHub
from helpers.models import HYBRID_27B, MLA, MOE_30B_A3B, QWEN3_VL_8B
from helpers.models import make_model as _model

DENSE_GQA = {  # Qwen3-8B
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 12288,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
DEEPSEEK_LITE = {
    **MLA,
    "n_routed_experts": 64,
    "num_experts_per_tok": 6,
    "n_shared_experts": 2,
    "first_k_dense_replace": 1,
    "moe_intermediate_size": 1408,
}
SHARDS = {  # two shards, a few MB of real bytes, as a sharded checkpoint is laid out
    "model-00001-of-00002.safetensors": {
        "model.embed_tokens.weight": ("BF16", 1024 * 1024),
        "model.layers.0.mlp.up_proj.weight": ("BF16", 2 * 1024 * 1024),
    },
    "model-00002-of-00002.safetensors": {"lm_head.weight": ("BF16", 1024 * 1024), "model.norm.weight": ("F32", 4096)},
}


@pytest.fixture
def hub(tmp_path: Path):
    models = {
        "Qwen/Qwen3-8B": _model(tmp_path / "models" / "dense", DENSE_GQA, SHARDS),
        "Qwen/Qwen3.8-27B": _model(tmp_path / "models" / "hybrid", HYBRID_27B),
        "deepseek-ai/DeepSeek-V2-Lite": _model(tmp_path / "models" / "mla", DEEPSEEK_LITE),
        "Qwen/Qwen3-VL-8B-Instruct": _model(tmp_path / "models" / "vl", QWEN3_VL_8B),
        "Qwen/Qwen3-30B-A3B": _model(tmp_path / "models" / "moe", MOE_30B_A3B),
        "big/Too-Big": _model(
            tmp_path / "models" / "big",
            DENSE_GQA,  # 70 GiB declared, a sparse file
            {"model.safetensors": {"model.embed_tokens.weight": ("BF16", 70 * 2**30)}},
            data=False,
        ),
    }
    server = LocalHub(models, HubBehaviour(chunk=64 * 1024))
    yield server
    server.close()


def _env(tmp_path: Path, hub: LocalHub, **extra: str) -> dict:
    return clean_env(
        tmp_path / "home",
        {"XDG_CACHE_HOME": str(tmp_path / "cache"), "MODELSCOPE_DOMAIN": hub.url, "HF_ENDPOINT": hub.url, **extra},
    )


def _run(tmp_path: Path, hub: LocalHub, *args: str, **extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "ascend_setup", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, hub, **extra),
        timeout=300,
        cwd=REPO,
    )


def _header_len(path: Path) -> int:
    with path.open("rb") as handle:
        return int.from_bytes(handle.read(8), "little")


def _figures(data: dict) -> dict:
    drop = {"model", "origin", "headline"}
    return {k: v for k, v in data.items() if k not in drop}


@pytest.mark.parametrize("source", ["modelscope", "huggingface"])
def test_fit_by_id_equals_fit_on_disk_and_reads_no_weight_byte(tmp_path: Path, hub: LocalHub, source: str) -> None:
    remote = _run(
        tmp_path, hub, "fit", "Qwen/Qwen3-8B", "--source", source, "--json", "--workdir", str(tmp_path / "wd")
    )
    assert remote.returncode == 0, remote.stderr
    local = _run(tmp_path, hub, "fit", str(hub.models["Qwen/Qwen3-8B"]), "--json", "--workdir", str(tmp_path / "wd"))
    r, l = json.loads(remote.stdout), json.loads(local.stdout)
    assert _figures(r) == _figures(l) and r["weights_source"] == "safetensors"
    assert source in r["origin"] and "2 safetensors headers by range requests" in r["origin"]
    for shard in SHARDS:  # the CDN sent the 8 length bytes and the header, nothing past them
        blob_len = _header_len(hub.models["Qwen/Qwen3-8B"] / shard)
        assert hub.ranges("Qwen/Qwen3-8B", shard) == [(0, 8), (8, 8 + blob_len)]
    # the second fit is offline: the hub is gone and the figures are the same
    port = hub.url
    hub.close()
    again = _run(tmp_path, hub, "fit", "Qwen/Qwen3-8B", "--source", source, "--json", "--workdir", str(tmp_path / "wd"))
    assert again.returncode == 0, again.stderr
    assert _figures(json.loads(again.stdout)) == _figures(r) and "cached in" in json.loads(again.stdout)["origin"]
    hub.__init__(hub.models)  # the fixture closes it again
    assert port


def test_default_source_is_modelscope_then_huggingface(tmp_path: Path, hub: LocalHub) -> None:
    dead = "http://127.0.0.1:9"  # nothing listens: ModelScope unreachable, Hugging Face answers
    out = _run(
        tmp_path, hub, "fit", "Qwen/Qwen3-8B", "--json", "--workdir", str(tmp_path / "wd"), MODELSCOPE_DOMAIN=dead
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["origin"].startswith("huggingface")
    missing = _run(tmp_path, hub, "fit", "nobody/Nothing", "--workdir", str(tmp_path / "wd"))
    assert missing.returncode == 2 and "no model nobody/Nothing" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.parametrize(
    "repo,check",
    [
        ("Qwen/Qwen3.8-27B", lambda d: d["kv_bytes_per_token"] == 65536 and d["kv_layers"]["state"] == 48),
        ("deepseek-ai/DeepSeek-V2-Lite", lambda d: abs(d["weights_read_per_token"] / 2 / 1e9 - 2.45) < 0.05),
        ("Qwen/Qwen3-VL-8B-Instruct", lambda d: abs(d["vision_bytes"] / 2**30 - 1.07) < 0.01),
        ("Qwen/Qwen3-30B-A3B", lambda d: abs(d["weights_read_per_token"] / 1e9 - 6.08) < 0.06),
    ],
)
def test_real_shaped_configs_by_id(tmp_path: Path, hub: LocalHub, repo: str, check) -> None:
    out = _run(tmp_path, hub, "fit", repo, "--source", "modelscope", "--json", "--workdir", str(tmp_path / "wd"))
    data = json.loads(out.stdout)
    assert out.returncode in (0, 1) and data["weights_source"] == "config" and check(data), data


def test_model_fetch_refuses_what_does_not_fit_before_a_weight_byte(tmp_path: Path, hub: LocalHub) -> None:
    out = _run(
        tmp_path,
        hub,
        "model",
        "fetch",
        "big/Too-Big",
        "--to",
        str(tmp_path / "dl"),
        "--source",
        "huggingface",
        "--workdir",
        str(tmp_path / "wd"),
    )
    assert out.returncode == 1 and "refused before downloading" in out.stderr and "--force" in out.stderr
    blob_len = _header_len(hub.models["big/Too-Big"] / "model.safetensors")
    assert hub.ranges("big/Too-Big", "model.safetensors") == [(0, 8), (8, 8 + blob_len)]  # the header only
    assert not (tmp_path / "dl").exists() or not any((tmp_path / "dl").rglob("*.safetensors*"))


def _download_served(hub: LocalHub, repo: str, shard: str) -> int:
    """What the CDN sent of a shard for downloads, not counting fit's two header reads."""
    header_end = 8 + _header_len(hub.models[repo] / shard)
    return sum(end - start for start, end in hub.ranges(repo, shard) if end > header_end)


def _kill_when_written(proc: subprocess.Popen, hub: LocalHub, repo: str, shard: str, part: Path, at: int) -> None:
    """SIGKILL the fetch once the .part holds at least `at` bytes and everything the CDN sent it this run
    (the CDN sends 32 KiB chunks slowly; the client writes 256 KiB at a time)."""
    served0 = _download_served(hub, repo, shard)
    part0 = part.stat().st_size if part.exists() else 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        size = part.stat().st_size if part.exists() else 0
        if size >= at and size - part0 >= _download_served(hub, repo, shard) - served0:
            break
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_model_fetch_survives_three_sigkills_and_catches_a_corrupted_file(tmp_path: Path, hub: LocalHub) -> None:
    repo, shard = "Qwen/Qwen3-8B", "model-00001-of-00002.safetensors"
    size = (hub.models[repo] / shard).stat().st_size
    dest = tmp_path / "dl"
    args = [
        sys.executable,
        "-m",
        "ascend_setup",
        "model",
        "fetch",
        repo,
        "--to",
        str(dest),
        "--source",
        "modelscope",
        "--workdir",
        str(tmp_path / "wd"),
    ]
    (tmp_path / "home").mkdir(exist_ok=True)
    _run(tmp_path, hub, "fit", repo, "--source", "modelscope", "--workdir", str(tmp_path / "wd"))  # headers cached
    header_bytes = hub.served(repo, shard)
    hub.behaviour.chunk, hub.behaviour.chunk_delay = 32 * 1024, 0.05
    part = dest / (shard + ".part")
    for kill in range(3):
        proc = subprocess.Popen(
            args,
            env=_env(tmp_path, hub),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _kill_when_written(proc, hub, repo, shard, part, (kill + 1) * size // 4)
    assert part.exists() and 0 < part.stat().st_size < size
    hub.behaviour.chunk_delay = 0.0
    hub.behaviour.corrupt_once.add((repo, "model-00002-of-00002.safetensors"))
    done = _run(
        tmp_path,
        hub,
        "model",
        "fetch",
        repo,
        "--to",
        str(dest),
        "--source",
        "modelscope",
        "--json",
        "--workdir",
        str(tmp_path / "wd"),
    )
    assert done.returncode == 0, done.stderr
    assert (dest / shard).read_bytes() == (hub.models[repo] / shard).read_bytes() and not part.exists()
    served = _download_served(hub, repo, shard)
    assert hub.served(repo, shard) - served == header_bytes  # fit's header reads, once: the fetches used the cache
    print(f"shard of {size} bytes served {served} bytes over 3 SIGKILLs and a resume")
    assert size <= served <= size + 32 * 1024
    second = "model-00002-of-00002.safetensors"
    assert "sha256" in done.stderr and "fetching it again" in done.stderr  # the corrupted copy was caught
    assert (dest / second).read_bytes() == (hub.models[repo] / second).read_bytes()
    assert json.loads(done.stdout)["files"] == len(list(hub.models[repo].iterdir()))


def test_model_fetch_checks_the_disk_before_the_first_byte(tmp_path: Path, hub: LocalHub) -> None:
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)]).returncode:
        pytest.skip("no tmpfs mount here")
    try:
        out = _run(
            tmp_path,
            hub,
            "model",
            "fetch",
            "Qwen/Qwen3-8B",
            "--to",
            str(small / "m"),
            "--source",
            "huggingface",
            "--workdir",
            str(tmp_path / "wd"),
        )
        assert out.returncode == 1 and "free on that disk" in out.stderr
        assert hub.served("Qwen/Qwen3-8B", "config.json") > 0 and not (small / "m").exists()
        assert all(end <= 8 + 4096 for _, end in hub.ranges("Qwen/Qwen3-8B", "model-00001-of-00002.safetensors"))
    finally:
        subprocess.run(["umount", str(small)])


@pytest.mark.live
def test_live_hub_fit() -> None:
    try:
        socket.create_connection(("www.modelscope.cn", 443), timeout=5).close()
    except OSError:
        pytest.skip("ModelScope is not reachable from here")
    out = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "fit", "Qwen/Qwen3-0.6B", "--source", "modelscope", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert out.returncode == 0 and json.loads(out.stdout)["weights_source"] == "safetensors"


def test_model_fetch_resumes_on_login_and_removes_its_block(tmp_path: Path, hub: LocalHub) -> None:
    repo, shard = "Qwen/Qwen3-8B", "model-00001-of-00002.safetensors"
    dest, bashrc = tmp_path / "dl", tmp_path / "home" / ".bashrc"
    (tmp_path / "home").mkdir()
    bashrc.write_text("export KEEP=1\n")
    hub.behaviour.chunk, hub.behaviour.chunk_delay = 32 * 1024, 0.05
    args = [
        sys.executable,
        "-m",
        "ascend_setup",
        "model",
        "fetch",
        repo,
        "--to",
        str(dest),
        "--source",
        "modelscope",
        "--workdir",
        str(tmp_path / "wd"),
        "--resume-on-login",
    ]
    proc = subprocess.Popen(
        args,
        env=_env(tmp_path, hub),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _kill_when_written(proc, hub, repo, shard, dest / (shard + ".part"), 64 * 1024)
    block = bashrc.read_text()
    assert block.startswith("export KEEP=1\n") and f"model fetch {repo} --to {dest}" in block and "--on-login" in block
    hub.behaviour.chunk_delay = 0.0
    login = _run(
        tmp_path,
        hub,
        "model",
        "fetch",
        repo,
        "--to",
        str(dest),
        "--source",
        "modelscope",
        "--workdir",
        str(tmp_path / "wd"),
        "--resume-on-login",
        "--on-login",
    )
    assert login.returncode == 0 and "continuing in the background" in login.stderr
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and bashrc.read_text() != "export KEEP=1\n":
        time.sleep(0.2)
    assert bashrc.read_text() == "export KEEP=1\n"  # the completed fetch removed its block, and only it
    assert (dest / shard).read_bytes() == (hub.models[repo] / shard).read_bytes()
