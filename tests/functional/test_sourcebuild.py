"""The source build's pieces: its environment, MAX_JOBS, progress, kernels, build trees, third-party archives."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error

from ascend_setup.errors import StepFailed
from ascend_setup.simulate.stub_plugin import build_stub_plugin_sdist
from ascend_setup.simulate.third_party import ArchiveServer, build_stub_archives
from ascend_setup.sourcebuild import thirdparty
from ascend_setup.sourcebuild.jobs import GIB, cgroup_memory_limit, job_budget
from ascend_setup.sourcebuild.kernels import missing_kernels
from ascend_setup.sourcebuild.source import build_env, stage_watcher
from ascend_setup.sourcebuild.tree import tree_for

#: What the OS's userland (glibc, the Python build, venv, the trust store, the toolchain, the disk) can
#: change: the glibc 2.31 root runs this file too.
pytestmark = pytest.mark.userland


def test_build_env_puts_the_venv_first_and_keeps_only_cannss_pythonpath(tmp_path: Path) -> None:
    host = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": "/home/u/site",
        "PIP_CONSTRAINT": "/c.txt",
        "PYTHONHOME": "/opt/py",
        "COMPILE_CUSTOM_KERNELS": "0",
    }
    cann = {**host, "PATH": "/cann/bin:/usr/bin:/bin", "PYTHONPATH": "/cann/python/site-packages:/home/u/site"}
    built = build_env(
        cann, host=host, venv=tmp_path / "venv", soc="ascend910b3", jobs=3, ascend_home="/cann", home=tmp_path / "home"
    )
    env = built.env
    assert env["PATH"].split(":")[0] == str(tmp_path / "venv" / "bin") and "/cann/bin" in env["PATH"]
    assert env["PYTHONPATH"] == "/cann/python/site-packages"
    assert "PYTHONHOME" not in env and "PIP_CONSTRAINT" not in env
    assert env["ASCEND_PYTHON_EXECUTABLE"] == str(tmp_path / "venv" / "bin" / "python3")
    assert env["COMPILE_CUSTOM_KERNELS"] == "1" and env["MAX_JOBS"] == "3" and env["HOME"] == str(tmp_path / "home")
    assert any("COMPILE_CUSTOM_KERNELS=0" in n for n in built.notes) and any("/home/u/site" in n for n in built.notes)


def test_max_jobs_follows_the_tighter_of_memavailable_and_the_cgroup(tmp_path: Path) -> None:
    assert job_budget(64, 200 * GIB, 32 * GIB).jobs == 8
    assert "cgroup limit" in job_budget(64, 200 * GIB, 32 * GIB).why
    assert job_budget(64, 12 * GIB, None).jobs == 3 and job_budget(2, 200 * GIB, None).jobs == 2
    assert job_budget(8, 1 * GIB, None).jobs == 1
    # cgroup v2: the tightest limit of the cgroup and its ancestors; "max" is none
    root = tmp_path / "sys"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "memory.max").write_text(f"{16 * GIB}\n")
    (root / "a" / "b" / "memory.max").write_text("max\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/a/b\n")
    assert cgroup_memory_limit(proc, root) == 16 * GIB
    # cgroup v1: memory.limit_in_bytes, where 2**63-1 rounded to a page means unlimited
    (root / "memory" / "x").mkdir(parents=True)
    (root / "memory" / "x" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    proc.write_text("4:memory:/x\n3:cpu,cpuacct:/x\n")
    assert cgroup_memory_limit(proc, root) is None
    (root / "memory" / "x" / "memory.limit_in_bytes").write_text(f"{8 * GIB}\n")
    assert cgroup_memory_limit(proc, root) == 8 * GIB


def test_progress_moves_for_makefiles_and_ninja() -> None:
    seen = []
    watch = stage_watcher(lambda n, m: seen.append((n, m)))
    for line in (
        "[ 42%] Building CXX object x.o",
        "[3/7] Building CXX object y.o",
        "[100%] Linking CXX",
        "-- checking [nothing]",
    ):
        watch(line)
    assert seen == [(42, 100), (3, 7), (100, 100)]


def test_kernels_as_the_published_wheel_holds_them() -> None:
    published = [
        "vllm_ascend/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so",
        "vllm_ascend/libvllm_ascend_kernels.so",
        "vllm_ascend/_cann_ops_custom/vendors/custom_transformer/op_api/lib/libcust_opapi.so",
    ]
    assert missing_kernels(published, "ascend910b3") == []
    assert len(missing_kernels(["vllm_ascend/__init__.py"], "ascend910b3")) == 3
    assert missing_kernels([published[0], published[2]], "ascend310p1") == []  # 310P builds no AscendC kernels
    assert missing_kernels([published[0], published[2]], "ascend910b1") == [
        "the AscendC kernels (vllm_ascend/libvllm_ascend_kernels.so)"
    ]


def test_a_tree_per_build_key(tmp_path: Path) -> None:
    sdist = build_stub_plugin_sdist(tmp_path / "sdist", "0.23.0", [])
    first = tree_for(sdist, tmp_path / "src", "soc=a")
    assert first.case == "fresh tree (first build)"
    (first.path / "build" / "lib").mkdir(parents=True)
    (first.path / "build" / "lib" / "planted.so").write_text("x")
    assert tree_for(sdist, tmp_path / "src", "soc=a").case.startswith("incremental")
    assert (first.path / "build" / "lib" / "planted.so").exists()
    other = tree_for(sdist, tmp_path / "src", "soc=b")
    assert "it was built for soc=a" in other.case and not (other.path / "build").exists()
    assert [p.name for p in (tmp_path / "src").iterdir()] == ["vllm_ascend-0.23.0"]


def test_archives_read_from_the_cmake_files_fetched_checked_and_placed(tmp_path: Path) -> None:
    server = ArchiveServer(tmp_path / "origin")
    try:
        stubs = build_stub_archives(tmp_path / "origin", server.url)
        sdist = build_stub_plugin_sdist(tmp_path / "sdist", "0.23.0", [], third_party=stubs)
        tree = tree_for(sdist, tmp_path / "src", "k").path
        archives = thirdparty.read_archives(tree)
        assert [(a.name, a.url, a.sha256) for a in archives] == [(s.name, s.url, s.sha256) for s in stubs]
        assert [a.unpack_to for a in archives] == ["third_party/json", None, "third_party/makeself"]
        cache = tmp_path / "cache"
        with pytest.raises(StepFailed) as dead:
            thirdparty.gate(archives, cache, "http://127.0.0.1:9/mirror", timeout=2)
        assert "3 third-party archive(s)" in dead.value.message and "--build-deps-url" in (dead.value.hint or "")
        thirdparty.gate(archives, cache, None)
        lines = thirdparty.fetch(archives, cache, None)
        assert any("no hash in csrc/cmake/third_party/json.cmake" in line for line in lines)
        thirdparty.place(archives, cache, tree)
        for stub in stubs:
            assert (tree / "csrc" / stub.found).is_file(), stub.found
        # a damaged copy is fetched again, and one that does not match the CMake file's hash is refused
        (cache / stubs[2].name).write_bytes(b"damaged")
        thirdparty.fetch(archives, cache, None)
        assert thirdparty._verified(cache / stubs[2].name, archives[2])
        (tmp_path / "origin" / "cann-src-third-party" / stubs[2].name).write_bytes(b"tampered")
        (cache / stubs[2].name).unlink()
        with pytest.raises(StepFailed, match=r"does not match.*\(from csrc/cmake/third_party/makeself-fetch"):
            thirdparty.fetch(archives, cache, None)
    finally:
        server.close()


@pytest.mark.parametrize("flag", [["--jobs", "0"], ["--build-deps-url", "ftp://mirror/x"]])
def test_bad_build_flags_are_one_line(cli, tmp_path: Path, flag) -> None:
    proc = cli("install", "--cann", "9.1.0", "--workdir", str(tmp_path / "wd"), *flag, "--dry-run")
    assert_one_line_error(proc)
