"""Validation against the installed vllm-ascend's source (the stub's, shaped like 0.23.0's): what 0.23.0 would
ignore without a word is refused, with the key, the installed version and the replacement."""

from __future__ import annotations

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


@pytest.mark.parametrize("args", [
    ["--additional-config", '{"torchair_graph_config": {"enabled": true}}'],
    ["--additional_config", '{"torchair_graph_config": {"enabled": true}}'],  # the 0.23.0 DeepSeek tutorial's
    ['--additional-config={"torchair_graph_config": {"enabled": true}}'],
    ["--additional-conf", '{"torchair_graph_config": {"enabled": true}}'],  # a unique prefix
    ["--additional-config.torchair_graph_config.enabled=true"],
    ["--additional_config.torchair_graph_config.enabled", "true"],
    ["--additional-config", '{"enable_flashcomm1": false}', "--additional-config.torchair_graph_config.enabled",
     "true"],  # the dotted one comes last, and wins
], ids=["plain", "underscores", "equals", "prefix", "dotted", "dotted-underscores", "dotted-wins"])
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


def test_unread_and_deprecated_variables_are_refused_all_at_once(keys: KeySet) -> None:
    message = refused(keys, env={"VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE": "1"},
                      user_env={"VLLM_ASCEND_ENABLE_FLASHCOMM1": "0", "VLLM_ASCEND_ENABLE_PREFETCH_MLP": "1"})
    assert "variable VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE is not read by the installed vllm-ascend 0.23.0" in message
    assert "your environment's VLLM_ASCEND_ENABLE_FLASHCOMM1 is deprecated" in message
    assert "--additional-config '{\"enable_flashcomm1\": ...}'" in message
    assert "weight_prefetch_config" in message  # PREFETCH_MLP's replacement
    assert message.count("; ") >= 2


def test_what_the_plugin_reads_passes(keys: KeySet) -> None:
    config = ('{"ascend_compilation_config": {"fuse_qknorm_rope": false}, "enable_flashcomm1": false, '
              '"hamming_sparse": {"enabled": true}}')
    check(keys, ["--additional-config", config],
          env={"VLLM_ASCEND_ENABLE_BATCH_MEMCPY": "1", "TASK_QUEUE_ENABLE": "1"}, user_env={"HOME": "/root"})
    check(keys, ["--additional-config", '{"torchair_graph_config": {}}', "--additional-config", config])  # last wins


@pytest.mark.parametrize("value, words", [
    ("{nope", "not a JSON object"),  # vLLM's parser takes text that is no {...} object
    ("[1]", "not a JSON object"),
    ("{nope}", "Value {nope} cannot be converted to JSON."),
    ("[" * 60_000 + "]" * 60_000, "not a JSON object"),
    ("{" + '"a":{' * 60_000 + "}" * 60_001, "cannot be converted to JSON (nested too deeply)."),
], ids=["text", "list", "broken", "deep-list", "deep-object"])
def test_an_additional_config_that_is_not_an_object_is_bad_input(keys: KeySet, value: str, words: str) -> None:
    message = refused(keys, ["--additional-config", value])
    assert words in message and len(message) < 300


def test_a_plugin_without_the_sources_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"has no ascend_config\.py"):
        installed_keys(tmp_path, "0.23.0")


@pytest.mark.parametrize("host, exposed", [(None, True), ("0.0.0.0", True), ("::", True), ("10.0.0.5", True),
                                           ("node1", True), ("127.0.0.1", False), ("::1", False),
                                           ("localhost", False)])
def test_a_host_beyond_loopback_is_said_to_be_exposed(host, exposed: bool) -> None:
    from ascend_setup.commands.serve import exposed as is_exposed

    assert is_exposed(host) is exposed
