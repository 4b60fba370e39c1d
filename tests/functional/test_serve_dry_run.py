"""`serve --dry-run` for each family of the serve table, on the simulated A2 host: the expected commands are held
here, composed from fit's numbers, the row's hints (one --additional-config) and the table, and validated against
the installed stub vllm-ascend (0.23.0's key sets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.serving import serving_venv

from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.model_dirs import build_model

GRAPH = ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}']  # --async-scheduling: vLLM's default
FUSION_OFF = ["--additional-config", '{"ascend_compilation_config": {"fuse_qknorm_rope": false}}']
THINKING_OFF = ["--default-chat-template-kwargs", '{"enable_thinking": false}']
BASE_ENV = {
    "ASCEND_RT_VISIBLE_DEVICES": "0",
    "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
    "TASK_QUEUE_ENABLE": "1",
    "OMP_NUM_THREADS": "1",
    "OMP_PROC_BIND": "false",
}


def head(name: str, length: int) -> list:
    return [
        "--served-model-name",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--max-model-len",
        str(length),
        "--gpu-memory-utilization",
        "0.9",
    ]


# the serving venv's Triton works (HAS_TRITON), so the row's fuse_qknorm_rope switch, needed only without
# Triton, is left out: the fusion stays on
EXPECTED = {
    "dense": (["dense"], head("dense", 40960) + GRAPH + THINKING_OFF),
    # the field report measured 254,336 KV tokens for Qwen3-VL-8B on a 910B3: its 262,144 maximum would fail
    # vLLM's KV sizing; the length is fit's lower bound in whole blocks (test_vision_length_is_one_vllm_accepts)
    "vision": (
        ["vision-language"],
        head("vision", 0)
        + GRAPH
        + ["--mm-processor-cache-gb", "0"]
        + THINKING_OFF
        + ["--additional-config", '{"enable_flashcomm1": false}'],
    ),
    "moe": (["moe"], head("moe", 40960) + GRAPH + ["--no-enable-prefix-caching"] + THINKING_OFF),
    "hybrid": (
        ["hybrid-linear-attention"],
        head("hybrid", 262144) + GRAPH + ["--no-enable-prefix-caching"] + THINKING_OFF,
    ),
    # DeepSeek-V2-Lite's shape: MoE and MLA, 16 heads per card: graph mode in 0.23.0 (mla_v1.py pads the heads)
    "mla": (["moe", "mla"], head("mla", 163840) + GRAPH + ["--no-enable-prefix-caching"]),
    "modelslim": (
        ["dense", "modelslim-w8a8"],
        head("modelslim", 40960) + GRAPH + ["--quantization", "ascend"] + THINKING_OFF,
    ),
}


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("serve-host")
    cann = build_fake_cann(root / "Ascend")
    return {"root": root, "cann": str(cann.root), "venv": str(serving_venv(root))}


def dry_run(cli, host: dict, model: Path, *extra: str):
    return cli(
        "serve",
        str(model),
        "--dry-run",
        "--venv",
        host["venv"],
        "--workdir",
        str(host["root"] / "wd"),
        "--cann-home",
        host["cann"],
        *extra,
    )


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_each_family_composes_its_command(cli, host: dict, family: str) -> None:
    model = build_model(host["root"] / "models" / family, family)
    proc = dry_run(cli, host, model, "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    families, args = EXPECTED[family]
    if family == "vision":
        at = args.index("--max-model-len") + 1
        args = [*args[:at], str(plan["max_model_len"]), *args[at + 1 :]]
    assert plan["validated"] is True and plan["families"] == families
    assert plan["argv"][1:] == ["serve", str(model), *args]
    assert plan["environment"] == BASE_ENV
    assert plan["graph_mode"] is True


def test_vision_length_is_one_vllm_accepts(cli, host: dict) -> None:
    """Qwen3-VL-8B on a 910B3: at most the 254,336 KV tokens the field report's vLLM sized, in whole 128-token
    blocks; a longer --max-model-len is refused naming the largest that fits."""
    model = build_model(host["root"] / "models" / "vision", "vision")
    plan = json.loads(dry_run(cli, host, model, "--json").stdout)
    length = plan["max_model_len"]
    assert 200_000 < length <= 254_336 and length % 128 == 0
    refused = dry_run(cli, host, model, "--max-model-len", str(length + 128))
    assert refused.returncode == 2 and f"the largest that fits is {length}" in refused.stderr
    assert dry_run(cli, host, model, "--json", "--max-model-len", str(length)).returncode == 0


def test_the_script_is_one_item_a_line_with_why_and_runs_in_bash(cli, host: dict) -> None:
    model = build_model(host["root"] / "models" / "dense", "dense")
    proc = dry_run(cli, host, model)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    end = lines.index('"${serve[@]}"')
    assert "serve=(" in lines and all(line.startswith("# ") for line in lines[end + 1 :])  # then only notes
    items = [line for line in lines if line.startswith(("export ", "  --"))]
    assert len(items) == 5 + 7 and all("  # " in line for line in items)  # every item says why
    assert sum("set_env.sh" in line and "set +u" in line for line in lines) == 2  # the toolkit's and NNAL's
    # (the fake CANN's set_env.sh is hostile: it sets -e, then fails and returns 1, as some real ones do)
    script = proc.stdout.replace('"${serve[@]}"', 'printf "%s\\n" "${serve[@]}"; echo "$ASCEND_HOME_PATH"')
    import subprocess

    run = subprocess.run(["bash", "-eu", "-c", script], capture_output=True, text=True, check=True)  # as printed
    printed = run.stdout.splitlines()
    assert printed[-1].startswith(host["cann"])  # CANN's environment is in place for the server
    assert printed[printed.index("--default-chat-template-kwargs") + 1] == THINKING_OFF[1]  # as printed


def test_concurrency_caps_the_default_context_at_the_kv_budget(cli, host: dict) -> None:
    """Qwen3-VL's 256K default fails KV sizing; at 8 sequences the budget, not the model's maximum, decides."""
    model = build_model(host["root"] / "models" / "vision", "vision")
    plan = json.loads(dry_run(cli, host, model, "--json", "--concurrency", "8").stdout)
    length = int(plan["argv"][plan["argv"].index("--max-model-len") + 1])
    assert 20_000 < length < 262144 and plan["max_model_len"] == length


@pytest.mark.parametrize(
    "given", [["--max-num-batched-tokens", "65536"], ["--max_num_seqs=16384", "--max_num_batched_tokens=16384"]]
)
def test_the_profiling_flags_given_after_dashes_shrink_the_kv_budget(cli, host: dict, given: list) -> None:
    """vLLM profiles activations at --max-num-batched-tokens and the logits of --max-num-seqs rows: given after
    --, in any spelling, they reach fit's KV budget, so the length serve composes stays one vLLM accepts. (For
    Qwen3-VL the encoder's largest image is the peak, 3.11 GiB, until the logits of about 7,900 rows pass it:
    16,384 tokens alone stay under it, 16,384 rows are well over it, and vLLM wants max_num_batched_tokens >=
    max_num_seqs.)"""
    model = build_model(host["root"] / "models" / "vision", "vision")
    default = json.loads(dry_run(cli, host, model, "--json", "--concurrency", "8").stdout)["max_model_len"]
    larger = json.loads(dry_run(cli, host, model, "--json", "--concurrency", "8", "--", *given).stdout)
    assert larger["max_model_len"] < default


def test_the_fusion_is_switched_off_only_without_triton(cli, host: dict, tmp_path: Path) -> None:
    """A venv whose upstream triton shadows triton-ascend (HAS_TRITON false): the row's switch is composed."""
    model = build_model(host["root"] / "models" / "dense", "dense")
    shadowed = serving_venv(tmp_path, shadowed=True)
    plan = json.loads(
        cli(
            "serve",
            str(model),
            "--dry-run",
            "--json",
            "--venv",
            str(shadowed),
            "--workdir",
            str(host["root"] / "wd"),
            "--cann-home",
            host["cann"],
        ).stdout
    )
    assert plan["argv"][-2:] == FUSION_OFF
    kept = json.loads(dry_run(cli, host, model, "--json").stdout)
    assert "--additional-config" not in kept["argv"] and any("needed only without Triton" in n for n in kept["notes"])


def test_user_arguments_after_dashes_win_and_merge(cli, host: dict) -> None:
    model = build_model(host["root"] / "models" / "dense", "dense")
    proc = dry_run(
        cli,
        host,
        model,
        "--json",
        "--",
        "--max-model-len",
        "4096",
        "--additional-config",
        '{"enable_cpu_binding": false}',
    )
    plan = json.loads(proc.stdout)
    argv = plan["argv"]
    assert argv.count("--max-model-len") == 1 and argv[argv.index("--max-model-len") + 1] == "4096"
    assert argv.count("--additional-config") == 1
    assert json.loads(argv[argv.index("--additional-config") + 1]) == {"enable_cpu_binding": False}


def test_serves_own_flags_after_dashes_are_bad_input(cli, host: dict) -> None:
    from helpers.cli import assert_one_line_error

    model = build_model(host["root"] / "models" / "dense", "dense")
    assert "--port after -- is serve's to set" in assert_one_line_error(dry_run(cli, host, model, "--", "--port", "9"))
    line = assert_one_line_error(dry_run(cli, host, model, "--concurrency", "16", "--", "--max-model-len=40000"))
    assert "the largest that fits is" in line  # checked against the KV budget like serve's own


def test_stale_typod_and_unread_names_are_refused_before_anything(cli, host: dict) -> None:
    """Your own keys after -- and your own VLLM_ASCEND_* variables, against the installed plugin's source."""
    from helpers.cli import assert_one_line_error

    model = build_model(host["root"] / "models" / "dense", "dense")
    line = assert_one_line_error(
        dry_run(
            cli,
            host,
            model,
            "--",
            "--additional-config",
            '{"torchair_graph_config": {"enabled": true}, "enable_flashcom1": false}',
        )
    )
    assert "torchair_graph_config is not read by the installed vllm-ascend 0.23.0 (removed in 0.12.0rc1)" in line
    assert "enable_flashcom1 is not read" in line and "did you mean enable_flashcomm1?" in line
    proc = cli(
        "serve",
        str(model),
        "--dry-run",
        "--venv",
        host["venv"],
        "--workdir",
        str(host["root"] / "wd"),
        "--cann-home",
        host["cann"],
        "--json",
        env={"VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE": "1"},
    )
    line = assert_one_line_error(proc)
    assert "your environment's VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE is not read" in line
    assert json.loads(proc.stdout)["exit"] == 2


@pytest.mark.parametrize(
    "spelling", [["--served_model_name", "foo"], ["--served-model", "foo"], ["--served-model-name", "foo", "bar"]]
)
def test_a_served_name_after_dashes_in_any_spelling_is_the_one_readiness_waits_for(
    cli, host: dict, spelling: list
) -> None:
    model = build_model(host["root"] / "models" / "dense", "dense")
    proc = dry_run(cli, host, model, "--json", "--", *spelling)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["served_name"] == "foo"
    assert "dense" not in plan["argv"]  # serve's own --served-model-name is dropped, not left to race theirs


@pytest.mark.parametrize(
    "args, words",
    [
        (["--additional_config", '{"torchair_graph_config": {}}'], "torchair_graph_config is not read"),
        (["--additional-config.torchair_graph_config.enabled=true"], "torchair_graph_config is not read"),
        (["--additional-config", "{bad}"], "Value {bad} cannot be converted to JSON."),
        (["--additional-config", "{bad"], "is '{bad', not a JSON object"),
        (["--additional-config", "[1]"], "not a JSON object"),
        (["--additional-config", "{" * 60_000], "not a JSON object"),
        (["--no-such-flag"], "vllm: error: unrecognized arguments: --no-such-flag"),
        (["--max", "4096"], "vllm serve: error: ambiguous option: --max could match"),
        (["--gpu-memory-utilization", "most"], "argument --gpu-memory-utilization: invalid float value: 'most'"),
        (["--por", "9000"], "--port after -- is serve's to set"),
        (["-tp", "2"], "--tensor-parallel-size after -- is serve's to set"),
        (["stray"], "a MODEL after -- is serve's to set"),
        (["--help"], "vllm serve: exits there (--help or --version), serving nothing"),
        (["--max_model_len=400000"], "the largest that fits is"),
    ],
    ids=[
        "underscores",
        "dotted",
        "broken-json",
        "text",
        "list",
        "deep",
        "unknown",
        "ambiguous",
        "type",
        "port-prefix",
        "tp",
        "positional",
        "help",
        "kv-budget",
    ],
)
def test_what_vllm_would_refuse_after_dashes_is_exit_2_in_one_line(cli, host: dict, args: list, words: str) -> None:
    from helpers.cli import assert_one_line_error

    model = build_model(host["root"] / "models" / "dense", "dense")
    line = assert_one_line_error(dry_run(cli, host, model, "--concurrency", "16", "--", *args))
    assert words in line and len(line) < 500


@pytest.mark.parametrize(
    "args",
    [
        ["--additional-config", '{"enable_dsa_cp": true}'],
        ["--additional_config", '{"enable_dsa_cp": true}'],
        ["--additional-config.enable_dsa_cp=true"],
    ],
    ids=["json", "underscores", "dotted"],
)
def test_a_documented_key_read_outside_ascend_config_is_accepted_after_dashes(cli, host: dict, args: list) -> None:
    """enable_dsa_cp (0.23.0's docs; read in utils.py, not ascend_config.py) passes the key check in any spelling,
    merged with the row's hint into the one --additional-config vLLM gets."""
    model = build_model(host["root"] / "models" / "vision", "vision")
    proc = dry_run(cli, host, model, "--json", "--", *args)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    argv = plan["argv"]
    assert plan["validated"] is True and argv.count("--additional-config") == 1
    assert json.loads(argv[argv.index("--additional-config") + 1]) == {
        "enable_flashcomm1": False,
        "enable_dsa_cp": True,
    }


def test_settings_after_dashes_replace_serves_own_by_destination(cli, host: dict) -> None:
    """`--max_model_len` and `--no-enable-prefix` are serve's --max-model-len and a prefix of
    --no-enable-prefix-caching: one of each reaches vLLM, theirs; and --host replaces the loopback default."""
    model = build_model(host["root"] / "models" / "moe", "moe")
    plan = json.loads(
        dry_run(
            cli, host, model, "--json", "--", "--max_model_len", "4096", "--no-enable-prefix", "--host", "0.0.0.0"
        ).stdout
    )
    argv = plan["argv"]
    assert plan["max_model_len"] == 4096 and argv.count("--max-model-len") == 1
    assert "--no-enable-prefix-caching" not in argv and argv[-5:] == [
        "--max-model-len",
        "4096",
        "--no-enable-prefix",
        "--host",
        "0.0.0.0",
    ]
    assert plan["host"] == "0.0.0.0" and "127.0.0.1" not in argv


def test_deepseek_v3_at_tp8_runs_in_graph_mode(cli, host: dict, tmp_path: Path) -> None:
    """128 heads over 8 cards is 16 a card: graph mode in 0.23.0 (its DeepSeek-V3.1 tutorial's own recipe)."""
    model = build_model(tmp_path / "DeepSeek-V3", "mla")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "num_attention_heads": 128}))
    proc = cli(
        "serve",
        str(model),
        "--dry-run",
        "--json",
        "--venv",
        host["venv"],
        "--workdir",
        str(host["root"] / "wd"),
        "--tp",
        "8",
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["graph_mode"] is True and "--enforce-eager" not in plan["argv"] and plan["tp"] == 8
    assert plan["argv"].count("--no-enable-prefix-caching") == 1  # MoE's, once
