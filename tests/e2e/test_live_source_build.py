"""The tool's own build step on the real vllm-ascend 0.23.0 sdist, against a fake CANN, with the network cut.

The fake CANN has no devel files, so CMake stops at configure; what matters is what ran before that: the
real setup.py, build_aclnn.sh and build.sh, in the environment the tool gives them. Cost: the 15 MB sdist,
and in a fresh venv setuptools, setuptools-scm, wheel, pybind11, cmake, decorator, attrs, sympy and
torch-npu (--no-deps: torch itself is not needed before CMake stops, and its x86_64 wheel pulls 3 GB).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascend_setup.errors import StepFailed
from ascend_setup.host.setenv import capture_env
from ascend_setup.index.download import download
from ascend_setup.index.pipconfig import configured_index
from ascend_setup.index.simple import SimpleIndex
from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.third_party import build_stub_archives
from ascend_setup.sourcebuild import thirdparty
from ascend_setup.sourcebuild.source import build_env
from ascend_setup.sourcebuild.tree import build_key, tree_for
from ascend_setup.utils.procs import run_logged

SDIST = "vllm_ascend-0.23.0.tar.gz"
BUILD_DEPS = [
    "setuptools>=67.1",
    "setuptools-scm>=8",
    "wheel",
    "pybind11",
    "cmake>=3.26",
    "decorator",
    "attrs",
    "sympy",
]


def _cache(text: str, key: str) -> str:
    match = re.search(rf"^{key}:[A-Z]+=(.*)$", text, re.M)
    return match.group(1) if match else ""


@pytest.mark.live
def test_the_real_sdist_builds_in_the_venv_offline(tmp_path: Path) -> None:
    start = time.monotonic()
    index = configured_index()
    (found,) = [f for f in SimpleIndex(index).project("vllm-ascend").files if f.filename == SDIST]
    sdist = download([found.url], tmp_path / SDIST, sha256=found.sha256, size=found.size)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *BUILD_DEPS], check=True)
    subprocess.run([*pip, "--no-deps", "torch-npu==2.10.0.post4"], check=True)
    prepared = time.monotonic()

    cann = build_fake_cann(tmp_path / "Ascend")
    base = capture_env([cann.set_env]).apply()
    tree = tree_for(sdist, tmp_path / "src", build_key(soc="ascend910b1", cann="9.1.0", torch="2.10.0")).path
    archives = thirdparty.read_archives(tree)
    assert [a.name for a in archives] == [
        "include.zip",
        "abseil-cpp-20230802.1.tar.gz",
        "protobuf-25.1.tar.gz",
        "makeself-release-2.5.0-patch1.tar.gz",
    ]
    assert all(a.url.startswith("https://") for a in archives) and archives[3].sha256
    with pytest.raises(StepFailed, match="4 third-party archive"):  # every one, at once, before any download
        thirdparty.gate(archives, tmp_path / "cache", "http://127.0.0.1:9", timeout=2)
    # the real origin does not resolve here: stand-ins with the same names show where CMake finds them
    stand_ins = tmp_path / "stand-ins"
    build_stub_archives(stand_ins, "http://unused")
    (stand_ins / "cann-src-third-party" / "protobuf-25.1.tar.gz").write_bytes(
        (stand_ins / "cann-src-third-party" / "abseil-cpp-20230802.1.tar.gz").read_bytes()
    )
    thirdparty.place(archives, stand_ins / "cann-src-third-party", tree)

    timings = {}
    for soc in ("ascend910b1", "910b"):  # 910b: setup.py maps it to A2 and skips build_aclnn, reaching configure
        built = build_env(
            base,
            host=dict(os.environ),
            venv=venv,
            soc=soc,
            jobs=2,
            ascend_home=str(cann.toolkit),
            home=tmp_path / "build-home",
        )
        log = tmp_path / f"build-{soc}.log"
        began = time.monotonic()
        with pytest.raises(StepFailed):  # CMake stops: the fake CANN has no devel files
            run_logged(
                [
                    "unshare",
                    "-n",
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "wheel",
                    "-v",
                    "--no-build-isolation",
                    "--no-deps",
                    "--wheel-dir",
                    str(tmp_path / "out"),
                    str(tree),
                ],
                log,
                env=built.env,
                what="vllm-ascend build",
            )
        timings[soc] = time.monotonic() - began
        text = log.read_text()
        assert "need download" not in text and "Downloading" not in text, text[-3000:]
        assert "Undefined soc_version" not in text
        assert "__device_type__ = 'A2'" in (tree / "vllm_ascend" / "_build_info.py").read_text()

    calls = cann.compiler_calls.read_text()  # recorded by the fake CANN's setenv.bash, sourced by build.sh
    assert f"python3={venv}/bin/python3" in calls and f"cmake={venv}/bin/cmake" in calls
    assert f"HOME={tmp_path}/build-home" in calls
    csrc_cache = (tree / "csrc" / "build" / "CMakeCache.txt").read_text()
    compiler_python = _cache(csrc_cache, "HI_PYTHON")  # csrc: find_package(Python3) -> the compiler
    assert compiler_python.startswith(str(venv)), compiler_python
    subprocess.run([compiler_python, "-c", "import decorator, attrs, sympy"], check=True)
    (temp_cache,) = tree.glob("build/temp.*/CMakeCache.txt")
    text = temp_cache.read_text()
    assert _cache(text, "TORCH_NPU_PATH").startswith(f"{venv}/lib/") and _cache(text, "TORCH_NPU_PATH").endswith(
        "site-packages/torch_npu"
    )
    assert _cache(text, "CMAKE_COMMAND").startswith(str(venv)), _cache(text, "CMAKE_COMMAND")
    assert _cache(text, "SOC_VERSION") == "ascend910b1"
    print(
        f"live build: sdist + venv {prepared - start:.0f}s, builds "
        + ", ".join(f"{s} {t:.0f}s" for s, t in timings.items())
    )
