"""The vllm-ascend source build on the simulated host: in the venv, with kernels whatever the environment
says, a clean tree per build key, and no network once the third-party archives are fetched."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from helpers.stack import status

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland

TREE = "src/vllm_ascend-0.23.0"


def _wheel(workdir: Path, soc: str) -> Path:
    (wheel,) = (workdir / "wheelhouse").glob(f"vllm_ascend-0.23.0-cann9.1.0-*-{soc}/*.whl")
    return wheel


def test_build_in_the_venv_with_kernels_then_another_key_offline(source_stack, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    host_site = tmp_path / "host-site"
    host_site.mkdir()
    proc = source_stack.install(
        workdir,
        env={
            "COMPILE_CUSTOM_KERNELS": "0",
            "PIP_CONSTRAINT": "/nonexistent.txt",
            "PYTHONPATH": f"{host_site}:{Path(__file__).parents[2]}",
        },
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "COMPILE_CUSTOM_KERNELS=0 in the environment is overridden with 1" in proc.stderr
    assert "note: a vllm-ascend source build would use MAX_JOBS=" in proc.stderr
    names = zipfile.ZipFile(_wheel(workdir, "ascend910b3")).namelist()
    assert any(n.startswith("vllm_ascend/vllm_ascend_C.cpython-") for n in names)
    assert "vllm_ascend/_cann_ops_custom/vendors/custom_transformer/op_api/lib/libcust_opapi.so" in names
    info = zipfile.ZipFile(_wheel(workdir, "ascend910b3")).read("vllm_ascend/_build_info.py").decode()
    assert "__device_type__ = 'A2'" in info
    venv = workdir / "venv"
    # the operator compiler ran with the venv's python3, and found the venv's cmake; HOME is the workdir's
    calls = source_stack.cann.compiler_calls.read_text().split("=== bisheng")[-1]
    assert f"python3={venv}/bin/python3" in calls and f"HI_PYTHON={venv}/bin/python3" in calls
    assert f"cmake={venv}/bin/cmake" in calls and f"HOME={workdir}/build-home" in calls
    assert str(host_site) not in calls and (workdir / "build-home" / ".gitconfig").is_file()
    assert not (source_stack.home / ".gitconfig").exists()
    log = (workdir / "logs" / "vllm-ascend.log").read_text()
    assert "fresh tree (first build)" in log and f"TORCH_NPU_PATH is {venv}/lib/" in log
    assert "third-party makeself-release-2.5.0-patch1.tar.gz: sha256 " in log
    assert "third-party include.zip: no hash in csrc/cmake/third_party/json.cmake, its sha256 is " in log
    tree = workdir / TREE
    assert not (tree / "csrc" / "third_party" / "fetched-during-build.log").exists()  # nothing fetched mid-build

    # another key: a fresh tree (the file planted in build/lib stays behind)
    planted = tree / "build" / "lib" / "vllm_ascend" / "planted.so"
    planted.write_text("built for ascend910b3\n")
    other = source_stack.install(workdir, "--soc", "ascend910b1")
    assert other.returncode == 0, other.stderr[-4000:]
    assert "fresh tree (it was built for soc=ascend910b3 cann=9.1.0 torch=2.10.0" in other.stderr
    names = zipfile.ZipFile(_wheel(workdir, "ascend910b1")).namelist()
    assert "vllm_ascend/planted.so" not in names and not planted.exists()
    assert any(n.startswith("vllm_ascend/vllm_ascend_C.cpython-") for n in names)
    assert not (tree / "csrc" / "third_party" / "fetched-during-build.log").exists()

    # the network cut (no interface but a downed loopback): a tree extracted again builds from the prefetch
    def offline_rebuild() -> subprocess.CompletedProcess:
        _wheel(workdir, "ascend910b1").unlink()
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "vllm-ascend"],
            capture_output=True,
            check=True,
        )
        return subprocess.run(
            ["unshare", "-n", *source_stack.install_argv(workdir, "--soc", "ascend910b1")],
            capture_output=True,
            text=True,
            env=source_stack.env(),
            timeout=900,
        )

    shutil.rmtree(tree)
    offline = offline_rebuild()
    assert offline.returncode == 0, offline.stderr[-4000:]
    assert "vllm-ascend build tree: fresh tree (first build)" in offline.stderr
    assert not (tree / "csrc" / "third_party" / "fetched-during-build.log").exists()
    assert all(s["state"] == "done" for s in status(source_stack, workdir)["steps"])
    # the same key again: the tree and its objects are kept, nothing is recompiled
    again = offline_rebuild()
    assert again.returncode == 0, again.stderr[-4000:]
    assert "incremental (same build key: soc=ascend910b1" in again.stderr
    assert (workdir / "logs" / "vllm-ascend.log").read_text().split("incremental")[-1].count("Building CXX") == 0


def test_an_unreachable_archive_origin_stops_before_the_build_and_names_the_mirror_flag(
    source_stack, tmp_path: Path
) -> None:
    """Every archive the CMake files name, checked before any is fetched; --build-deps-url fixes it."""
    workdir = tmp_path / "wd"
    dead = "http://127.0.0.1:9/mirror"
    proc = source_stack.install(workdir, "--build-deps-url", dead)
    assert proc.returncode == 1
    assert "3 third-party archive(s) of the operator build cannot be fetched" in proc.stderr
    assert f"{dead}/include.zip" in proc.stderr and "--build-deps-url" in proc.stderr
    assert not (workdir / TREE / "build" / "compiled.log").exists()  # the build never started
    mirror = f"{source_stack.host.archives.url}/cann-src-third-party"
    fixed = source_stack.install(workdir, "--build-deps-url", mirror)
    assert fixed.returncode == 0, fixed.stderr[-4000:]
