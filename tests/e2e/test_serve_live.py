"""The real vllm-ascend 0.23.0 sdist from the public index: its ascend_config.py and envs.py read with ast give
the same key sets as the simulated host's stub, and validation against them refuses a stale key, a typo'd key
and an unread variable."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.index.download import download
from ascend_setup.index.pipconfig import configured_index
from ascend_setup.index.simple import SimpleIndex
from ascend_setup.serve.keys import installed_keys
from ascend_setup.serve.validate import check_against
from ascend_setup.simulate.stub_plugin_config import FILES

SDIST = "vllm_ascend-0.23.0.tar.gz"


@pytest.mark.live
def test_the_real_sdists_key_sets_and_refusals(tmp_path: Path) -> None:
    (found,) = [f for f in SimpleIndex(configured_index()).project("vllm-ascend").files if f.filename == SDIST]
    sdist = download([found.url], tmp_path / SDIST, sha256=found.sha256, size=found.size)
    real = tmp_path / "real"
    with tarfile.open(sdist) as archive:
        for name in ("ascend_config.py", "envs.py"):
            member = archive.getmember(f"vllm_ascend-0.23.0/vllm_ascend/{name}")
            (real / name).parent.mkdir(parents=True, exist_ok=True)
            (real / name).write_bytes(archive.extractfile(member).read())
    stub = tmp_path / "stub"
    for path, text in FILES.items():
        (stub / path).parent.mkdir(parents=True, exist_ok=True)
        (stub / path).write_text(text)
    keys = installed_keys(real, "0.23.0")
    mine = installed_keys(stub / "vllm_ascend", "0.23.0")
    assert (keys.keys, keys.sub_keys, keys.env, keys.deprecated_env) == \
        (mine.keys, mine.sub_keys, mine.env, mine.deprecated_env)
    assert len(keys.keys) > 30 and "fuse_qknorm_rope" in keys.sub_keys["ascend_compilation_config"]
    for args, env, words in (
            (["--additional-config", '{"torchair_graph_config": {"enabled": true}}'], {}, "removed in 0.12.0rc1"),
            (["--additional-config", '{"ascend_compilation_config": {"enable_npu_graph_ex": false}}'], {},
             "did you mean ascend_compilation_config.enable_npugraph_ex?"),
            ([], {"VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE": "1"}, "VLLM_ASCEND_ENABLE_DENSE_OPTIMIZE is not read")):
        with pytest.raises(BadInput, match=words.replace("?", r"\?")):
            check_against(keys, args=args, env=env, user_env={})
