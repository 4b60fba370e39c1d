"""`ascend-setup plan` over the stub 9.1.0 stack on loopback indexes (and, with --live, the real index)."""

from __future__ import annotations

import json
import pytest

from conftest import assert_one_line_error
from helpers.ecosystem import build_ecosystem
from helpers.index_server import LocalIndex
from ascend_setup.index.pipconfig import configured_index
from ascend_setup.knowledge.builds import build_warnings
from ascend_setup.matrix import load_matrix

ROW = load_matrix().rows["9.1.0"]


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    eco = build_ecosystem(tmp_path_factory.mktemp("eco"), dict(ROW.packages), dict(ROW.cann_python_deps))
    main, ascend = LocalIndex(), LocalIndex()
    main.add_dir(eco.main)
    ascend.add_dir(eco.ascend)
    yield main, ascend
    main.close()
    ascend.close()


def _plan(cli, main, ascend, glibc="2.31", arch="aarch64", extra=None):
    proc = cli("plan", "--cann", "9.1.0", "--glibc", glibc, "--arch", arch, "--python", "3.11",
               "--index-url", main.url, "--extra-index-url", extra or ascend.url, "--json")
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else None)


def test_plan_on_glibc_231_aarch64(cli, indexes) -> None:
    main, ascend = indexes
    proc, data = _plan(cli, main, ascend)
    assert proc.returncode == 0, proc.stderr
    assert data["target"] == {"glibc": "2.31", "arch": "aarch64", "python": "3.11"}
    pkgs = {p["name"]: p for p in data["packages"]}
    va = pkgs["vllm-ascend"]
    assert va["outcome"] == "sdist" and va["file"] == "vllm_ascend-0.23.0.tar.gz"
    assert "newest wheel needs glibc 2.34" in va["reason"]
    assert pkgs["torch-npu"]["outcome"] == "wheel" and "aarch64" in pkgs["torch-npu"]["file"]
    assert pkgs["triton-ascend"]["outcome"] == "wheel" and pkgs["triton-ascend"]["index"] == ascend.url
    assert pkgs["arctic-inference"]["outcome"] == "sdist" and "no wheels published" in pkgs["arctic-inference"]["reason"]
    assert pkgs["torch"]["version"] == "2.10.0" and pkgs["transformers"]["version"] == "5.5.4"
    assert pkgs["fastapi"]["version"] == "0.115.0"  # vllm's >=0.115,<0.137 meets the plugin's <0.124
    for stripped in ("flashinfer-python", "tilelang", "nvidia-cudnn-frontend", "fastsafetensors"):
        assert stripped not in pkgs
    for cann_dep in ("decorator", "sympy", "cffi", "absl-py", "attrs"):
        assert pkgs[cann_dep]["outcome"] == "wheel"
    assert data["download_bytes"] == sum(p["size"] or 0 for p in data["packages"])
    assert any("vllm-ascend will be built from source" in w for w in data["warnings"])
    assert any("arctic-inference" in w for w in data["warnings"])


def test_plan_on_glibc_235_takes_the_wheel(cli, indexes) -> None:
    main, ascend = indexes
    proc, data = _plan(cli, main, ascend, glibc="2.35")
    va = next(p for p in data["packages"] if p["name"] == "vllm-ascend")
    assert va["outcome"] == "wheel" and va["file"].endswith("manylinux_2_34_aarch64.whl")
    assert not any("vllm-ascend" in w for w in data["warnings"])


def test_plan_without_the_ascend_index(cli, indexes) -> None:
    main, ascend = indexes
    proc, data = _plan(cli, main, ascend, extra=main.url)
    assert proc.returncode == 1
    ta = next(p for p in data["packages"] if p["name"] == "triton-ascend")
    assert ta["outcome"] == "unavailable" and "has only 3.2.0" in ta["reason"]


def test_plan_table_and_bad_input(cli, indexes) -> None:
    main, ascend = indexes
    proc = cli("plan", "--cann", "9.1.0", "--glibc", "2.31", "--arch", "aarch64", "--python", "3.11",
               "--index-url", main.url, "--extra-index-url", ascend.url)
    assert proc.returncode == 0 and "vllm-ascend" in proc.stdout and "download:" in proc.stdout
    assert "--glibc" in assert_one_line_error(cli("plan", "--cann", "9.1.0", "--glibc", "2.x"))
    assert "--arch" in assert_one_line_error(cli("plan", "--cann", "9.1.0", "--arch", "sparc", "--glibc", "2.31"))
    assert "known versions" in assert_one_line_error(cli("plan", "--cann", "7.0.0"))


def test_known_build_warnings() -> None:
    assert any("z3-solver" in w for w in build_warnings(["z3-solver"], (2, 31), 40))
    assert not any("z3-solver" in w for w in build_warnings(["z3-solver"], (2, 35), 40))
    assert build_warnings(["numpy"], (2, 31), 40) == []


@pytest.mark.live
def test_live_public_index(cli) -> None:
    public = configured_index()
    proc = cli("plan", "--cann", "9.1.0", "--glibc", "2.31", "--arch", "aarch64", "--python", "3.11",
               "--index-url", public, "--extra-index-url", public, "--json")
    data = json.loads(proc.stdout)
    pkgs = {p["name"]: p for p in data["packages"]}
    assert pkgs["vllm-ascend"]["outcome"] == "sdist" and "glibc 2.34" in pkgs["vllm-ascend"]["reason"]
    assert pkgs["torch-npu"]["outcome"] == "wheel"
    assert pkgs["triton-ascend"]["outcome"] == "unavailable"
    assert pkgs["arctic-inference"]["outcome"] == "sdist"
    proc = cli("plan", "--cann", "9.1.0", "--glibc", "2.35", "--arch", "aarch64", "--python", "3.11",
               "--index-url", public, "--extra-index-url", public, "--json")
    va = next(p for p in json.loads(proc.stdout)["packages"] if p["name"] == "vllm-ascend")
    assert va["outcome"] == "wheel" and va["file"].endswith("manylinux_2_34_aarch64.whl")
