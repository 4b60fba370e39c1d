"""Validation against the installed vllm-ascend's source (the stub's, shaped like 0.23.0's): what 0.23.0 would
ignore without a word is refused, with the key, the installed version and the replacement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.serve.keys import KeySet, installed_keys
from ascend_setup.serve.user_args import CONFIG, config_object, read_command
from ascend_setup.serve.validate import check_against
from ascend_setup.simulate.stub_plugin_config import FILES


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> KeySet:
    root = tmp_path_factory.mktemp("plugin")
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return installed_keys(root / "vllm_ascend", "0.23.0")


def check(keys: KeySet, args=(), env=None, user_env=None) -> None:
    """As serve checks a command: the additional_config vLLM's parser reads from it, whatever the spelling."""
    config = config_object(read_command(["model", *args]).get(CONFIG), "in the composed command")
    check_against(keys, config=config, env=env or {}, user_env=user_env or {})


def refused(keys: KeySet, args=(), env=None, user_env=None) -> str:
    with pytest.raises(BadInput) as caught:
        check(keys, args, env, user_env)
    return caught.value.message


def test_the_source_gives_keys_sub_keys_variables_and_deprecations(keys: KeySet) -> None:
    assert {"ascend_compilation_config", "enable_flashcomm1", "weight_prefetch_config", "refresh"} <= keys.keys
    assert keys.sub_keys["ascend_compilation_config"] >= {"enable_npugraph_ex", "fuse_qknorm_rope", "fuse_muls_add"}
    assert keys.sub_keys["ascend_fusion_config"] == {"fusion_ops_gmmswigluquant"}
    assert "dynamic_eplb" in keys.sub_keys["eplb_config"]  # a class-level _defaults dict
    assert keys.deprecated_env["VLLM_ASCEND_ENABLE_FLASHCOMM1"] == "enable_flashcomm1"
    assert "VLLM_ASCEND_ENABLE_NZ" in keys.env and "VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE" not in keys.env


@pytest.mark.parametrize(
    "args",
    [
        ["--additional-config", '{"torchair_graph_config": {"enabled": true}}'],
        ["--additional_config", '{"torchair_graph_config": {"enabled": true}}'],  # the 0.23.0 DeepSeek tutorial's
        ['--additional-config={"torchair_graph_config": {"enabled": true}}'],
        ["--additional-conf", '{"torchair_graph_config": {"enabled": true}}'],  # a unique prefix
        ["--additional-config.torchair_graph_config.enabled=true"],
        ["--additional_config.torchair_graph_config.enabled", "true"],
        [
            "--additional-config",
            '{"enable_flashcomm1": false}',
            "--additional-config.torchair_graph_config.enabled",
            "true",
        ],  # the dotted one comes last, and wins
    ],
    ids=["plain", "underscores", "equals", "prefix", "dotted", "dotted-underscores", "dotted-wins"],
)
def test_a_stale_key_names_its_removal_and_replacement(keys: KeySet, args: list) -> None:
    message = refused(keys, args)
    assert "torchair_graph_config is not read by the installed vllm-ascend 0.23.0 (removed in 0.12.0rc1)" in message
    assert "cudagraph_mode" in message


def test_a_typo_is_refused_with_the_key_it_meant(keys: KeySet) -> None:
    message = refused(keys, ["--additional-config", '{"ascend_compilation_config": {"enable_npu_graph_ex": false}}'])
    assert "ascend_compilation_config.enable_npu_graph_ex is not read" in message
    assert "did you mean ascend_compilation_config.enable_npugraph_ex?" in message


def test_a_sub_key_under_the_wrong_parent_is_refused(keys: KeySet) -> None:
    """The field report's own switch: fuse_qknorm_rope under ascend_fusion_config does nothing in 0.23.0."""
    message = refused(keys, ["--additional-config={\"ascend_fusion_config\": {\"fuse_qknorm_rope\": false}}"])
    assert "ascend_fusion_config.fuse_qknorm_rope is not read" in message


def test_unread_variables_are_refused_all_at_once_and_deprecated_ones_only_said(keys: KeySet) -> None:
    message = refused(
        keys,
        env={"VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE": "1"},
        user_env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "0", "VLLM_ASCEND_ENABLE_PREFETCH_MLP": "1"},
    )
    assert "variable VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE is not read by the installed vllm-ascend 0.23.0" in message
    assert "weight_prefetch_config" in message  # PREFETCH_MLP's replacement
    assert "FLASHCOMM1" not in message and message.count("; ") >= 1
    warnings = check_against(
        keys, config={}, env={"VLLM_ASCEND_ENABLE_MLAPO": "0"}, user_env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "0"}
    )
    assert warnings == [
        "variable VLLM_ASCEND_ENABLE_MLAPO is deprecated in vllm-ascend 0.23.0 (still honoured, as a fallback it says "
        "will be removed); replacement: --additional-config '{\"enable_mlapo\": ...}'",
        "your environment's VLLM_ASCEND_ENABLE_FLASHCOMM1 is deprecated in vllm-ascend 0.23.0 (still honoured, as a "
        "fallback it says will be removed); replacement: --additional-config '{\"enable_flashcomm1\": ...}'",
    ]


@pytest.mark.parametrize(
    "config",
    [
        {"enable_dsa_cp": True},
        {"enable_hamming_sparse": True},
        {"weight_nz_mode": 2},
        {"enable_flashcomm2_parallel_size": 4},
    ],
    ids=str,
)
def test_keys_read_outside_ascend_config_and_typed_values_pass(keys: KeySet, config: dict) -> None:
    """0.23.0 reads enable_dsa_cp in utils.py and enable_hamming_sparse in attention/kvcomp_attn."""
    assert check_against(keys, config=config, env={}, user_env={}) == []


@pytest.mark.parametrize(
    "config, words",
    [
        (
            {"enable_flashcomm1": "false"},
            'enable_flashcomm1 is "false", but vllm-ascend 0.23.0 reads it as a bool '
            '(bool("false") is True): give a JSON true or false',
        ),
        ({"enable_hamming_sparse": 1}, "reads it as a bool (bool(1) is True)"),
        (
            {"ascend_compilation_config": {"fuse_qknorm_rope": "off"}},
            "ascend_compilation_config.fuse_qknorm_rope is \"off\", but",
        ),
        ({"enable_flashcomm2_parallel_size": True}, "reads it as a int: give a JSON int"),
        ({"weight_nz_mode": "2"}, "reads it as a int"),
    ],
    ids=["bool-text", "bool-int", "sub-key", "int-bool", "int-text"],
)
def test_a_value_of_the_wrong_type_is_refused(keys: KeySet, config: dict, words: str) -> None:
    with pytest.raises(BadInput) as caught:
        check_against(keys, config=config, env={}, user_env={})
    assert words in caught.value.message


def test_a_key_read_only_to_warn_or_raise_is_deprecated_or_removed(tmp_path: Path) -> None:
    """vllm-ascend main's shape for retired keys: the read warns or raises, it uses nothing."""
    package = tmp_path / "vllm_ascend"
    package.mkdir()
    (package / "envs.py").write_text("env_variables = {}\n")
    (package / "ascend_config.py").write_text(
        "def init(additional_config, logger):\n"
        "    if 'old_switch' in additional_config:\n"
        "        logger.warning('old_switch is deprecated and does nothing; use new_switch instead')\n"
        "    if 'gone_switch' in additional_config:\n"
        "        raise ValueError(f'gone_switch has been removed: use {NEW} instead')\n"
        "    return additional_config.get('new_switch', False)\n"
    )
    found = installed_keys(package, "0.30.0")
    assert found.keys == {"new_switch"} and found.types == {"new_switch": "bool"}
    assert found.deprecated == {"old_switch": "old_switch is deprecated and does nothing; use new_switch instead"}
    assert found.removed == {"gone_switch": "gone_switch has been removed: use {...} instead"}
    assert check_against(found, config={"old_switch": True}, env={}, user_env={}) == [
        "--additional-config key old_switch is deprecated in vllm-ascend 0.30.0: old_switch is deprecated and does "
        "nothing; use new_switch instead"
    ]
    with pytest.raises(BadInput, match=r"gone_switch was removed from vllm-ascend 0\.30\.0: gone_switch has been"):
        check_against(found, config={"gone_switch": True}, env={}, user_env={})


def test_a_key_with_control_characters_is_shown_escaped(keys: KeySet) -> None:
    message = refused(keys, ["--additional-config", json.dumps({"\x1b]0;owned\x07": 1})])
    assert "\x1b" not in message and "\\x1b]0;owned\\x07" in message


def test_what_the_plugin_reads_passes(keys: KeySet) -> None:
    config = (
        '{"ascend_compilation_config": {"fuse_qknorm_rope": false}, "enable_flashcomm1": false, '
        '"hamming_sparse": {"enabled": true}}'
    )
    check(
        keys,
        ["--additional-config", config],
        env={"VLLM_ASCEND_ENABLE_BATCH_MEMCPY": "1", "TASK_QUEUE_ENABLE": "1"},
        user_env={"HOME": "/root"},
    )
    check(keys, ["--additional-config", '{"torchair_graph_config": {}}', "--additional-config", config])  # last wins


@pytest.mark.parametrize(
    "value, words",
    [
        ("{nope", "not a JSON object"),  # vLLM's parser takes text that is no {...} object
        ("[1]", "not a JSON object"),
        ("{nope}", "Value {nope} cannot be converted to JSON."),
        ("[" * 60_000 + "]" * 60_000, "not a JSON object"),
        ("{" + '"a":{' * 60_000 + "}" * 60_001, "cannot be converted to JSON (nested too deeply)."),
    ],
    ids=["text", "list", "broken", "deep-list", "deep-object"],
)
def test_an_additional_config_that_is_not_an_object_is_bad_input(keys: KeySet, value: str, words: str) -> None:
    message = refused(keys, ["--additional-config", value])
    assert words in message and len(message) < 300


def test_a_plugin_without_the_sources_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"has no ascend_config\.py"):
        installed_keys(tmp_path, "0.23.0")


@pytest.mark.parametrize(
    "host, exposed",
    [
        (None, True),
        ("0.0.0.0", True),
        ("::", True),
        ("10.0.0.5", True),
        ("node1", True),
        ("127.0.0.1", False),
        ("::1", False),
        ("localhost", False),
    ],
)
def test_a_host_beyond_loopback_is_said_to_be_exposed(host, exposed: bool) -> None:
    from ascend_setup.serve.serving import exposed as is_exposed

    assert is_exposed(host) is exposed
