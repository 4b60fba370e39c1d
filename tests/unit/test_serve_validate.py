"""Validation against the installed vllm-ascend's source (the stub's, shaped like 0.23.0's): what 0.23.0 would
ignore without a word is refused, with the key, the installed version and the replacement."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.serve.keys import KeySet, installed_keys
from ascend_setup.serve.validate import check_against
from ascend_setup.simulate.stub_plugin_config import FILES


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> KeySet:
    root = tmp_path_factory.mktemp("plugin")
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return installed_keys(root / "vllm_ascend", "0.23.0")


def refused(keys: KeySet, args=(), env=None, user_env=None) -> str:
    with pytest.raises(BadInput) as caught:
        check_against(keys, args=list(args), env=env or {}, user_env=user_env or {})
    return caught.value.message


def test_the_source_gives_keys_sub_keys_variables_and_deprecations(keys: KeySet) -> None:
    assert {"ascend_compilation_config", "enable_flashcomm1", "weight_prefetch_config", "refresh"} <= keys.keys
    assert keys.sub_keys["ascend_compilation_config"] >= {"enable_npugraph_ex", "fuse_qknorm_rope", "fuse_muls_add"}
    assert keys.sub_keys["ascend_fusion_config"] == {"fusion_ops_gmmswigluquant"}
    assert "dynamic_eplb" in keys.sub_keys["eplb_config"]  # a class-level _defaults dict
    assert keys.deprecated_env["VLLM_ASCEND_ENABLE_FLASHCOMM1"] == "enable_flashcomm1"
    assert "VLLM_ASCEND_ENABLE_NZ" in keys.env and "VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE" not in keys.env


def test_a_stale_key_names_its_removal_and_replacement(keys: KeySet) -> None:
    message = refused(keys, ["--additional-config", '{"torchair_graph_config": {"enabled": true}}'])
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
    check_against(keys, args=["--additional-config", config],
                  env={"VLLM_ASCEND_ENABLE_BATCH_MEMCPY": "1", "TASK_QUEUE_ENABLE": "1"}, user_env={"HOME": "/root"})


def test_an_additional_config_that_is_not_an_object_is_bad_input(keys: KeySet) -> None:
    assert "is not JSON" in refused(keys, ["--additional-config", "{nope"])
    assert "is not a JSON object" in refused(keys, ["--additional-config", "[1]"])


def test_a_plugin_without_the_sources_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"has no ascend_config\.py"):
        installed_keys(tmp_path, "0.23.0")
