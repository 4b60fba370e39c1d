"""`ascend-setup plan`: the whole closure for a target, over the stub 9.1.0 stack on loopback indexes
(and, with --live, on the real index)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error, clean_env

from ascend_setup.host.interpreters import probe
from ascend_setup.host.machine import glibc_version
from ascend_setup.index.pipconfig import pip_settings
from ascend_setup.knowledge.builds import build_warnings, toolchain_for
from ascend_setup.matrix import load_matrix
from ascend_setup.resolve.lockfile import read_lock
from ascend_setup.simulate.index_server import BlackHole, LocalIndex
from ascend_setup.simulate.world import venv_python_for

ROW = load_matrix().rows["9.1.0"]


def _plan(cli, indexes, glibc="2.31", arch="aarch64", python="3.11", ascend=None, *extra):
    main, asc, torch_cpu, _ = indexes
    proc = cli(
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        glibc,
        "--arch",
        arch,
        "--python",
        python,
        "--index-url",
        main.url,
        "--index",
        f"ascend={ascend or asc.url}",
        "--index",
        f"pytorch-cpu={torch_cpu.url}",
        "--json",
        *extra,
    )
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else None)


def test_plan_is_the_whole_closure_on_glibc_231_aarch64(cli, indexes) -> None:
    proc, data = _plan(cli, indexes)
    assert proc.returncode == 0, proc.stderr
    assert data["scope"] == "closure" and data["target"] == {
        "glibc": "2.31",
        "arch": "aarch64",
        "python": "3.11",
        "device": "A2",
    }
    pkgs = {p["name"]: p for p in data["packages"]}
    # transitive packages, at the versions caps two levels down decide
    assert pkgs["starlette"]["version"] == "0.50.0" and "fastapi -> starlette" in pkgs["starlette"]["via"][0]
    assert pkgs["numpy"]["version"] == "2.3.5"  # mistral-common caps it below 2.4 on Python < 3.13
    assert pkgs["tokenizers"]["version"] == "0.22.2"  # transformers 5.5.4 caps it
    assert pkgs["prometheus-fastapi-instrumentator"]["version"] == "7.1.0"  # 8.x needs starlette >= 1.0
    # the CUDA-only package xgrammar pulls back is kept, with its chain, and said
    assert "xgrammar -> apache-tvm-ffi" in pkgs["apache-tvm-ffi"]["via"][0]
    kept = [w for w in data["warnings"] if w["id"] == "cuda-only-kept"]
    assert kept and kept[0]["package"] == "apache-tvm-ffi" and "xgrammar" in kept[0]["message"]
    va = pkgs["vllm-ascend"]
    assert va["outcome"] == "sdist" and va["file"] == "vllm_ascend-0.23.0.tar.gz" and va["sha256"]
    assert "newest wheel needs glibc 2.34" in va["reason"]
    assert pkgs["torch"]["version"] == "2.10.0" and pkgs["torch"]["index"] == "mirror"
    assert pkgs["torch-npu"]["outcome"] == "wheel" and "aarch64" in pkgs["torch-npu"]["file"]
    assert pkgs["triton-ascend"]["index"] == "ascend" and pkgs["triton-ascend"]["index_url"] == indexes[1].url
    assert pkgs["arctic-inference"]["outcome"] == "sdist"
    assert "no wheels published" in pkgs["arctic-inference"]["reason"]
    for stripped in ("flashinfer-python", "tilelang", "nvidia-cudnn-frontend", "fastsafetensors", "triton"):
        assert stripped not in pkgs
    counts = data["summary"]
    assert counts["packages"] == len(pkgs) and counts["sdists"] == 2 and counts["unavailable"] == 0
    assert counts["wheels"] + counts["sdists"] == len(pkgs)
    assert data["download_bytes"] == sum(p["size"] or 0 for p in data["packages"])
    assert {w["id"] for w in data["warnings"]} >= {"known-build", "sdist-build", "cuda-only-kept"}
    assert all(set(w) == {"id", "package", "message"} for w in data["warnings"])


def _ours(index: LocalIndex, since: int) -> list:
    """The paths ascend-setup itself (not uv) asked of `index` since request number `since`."""
    return [
        path for path, headers in index.requests[since:] if headers.get("User-Agent", "").startswith("ascend-setup/")
    ]


def test_files_come_from_uv_and_what_was_read_once_is_not_read_again(cli, indexes) -> None:
    """After the resolution, no project page is read for a package uv listed a wheel for (pylock.toml gives
    its files); vllm's metadata and an sdist's pyproject.toml, once read, come from the cache by sha256."""
    main = indexes[0]
    since = len(main.requests)
    proc, data = _plan(cli, indexes)
    assert proc.returncode == 0, proc.stderr
    pages = {path.split("/")[2] for path in _ours(main, since) if path.startswith("/simple/")}
    sdists = {p["name"] for p in data["packages"] if p["outcome"] == "sdist"}
    assert pages <= set(ROW.packages) | sdists, pages - set(ROW.packages) - sdists
    wheels = [p for p in data["packages"] if p["outcome"] == "wheel" and p["name"] not in ROW.packages]
    assert len(wheels) > 40 and all(p["sha256"] and p["size"] and p["file"] in p["url"] for p in wheels)
    assert any(path.startswith("/files/") for path in _ours(main, since))  # metadata and the sdists' pyproject
    again = len(main.requests)
    proc, second = _plan(cli, indexes)
    assert [path for path in _ours(main, again) if path.startswith("/files/")] == []
    assert second["packages"] == data["packages"] and second["warnings"] == data["warnings"]


def test_plan_on_x86_64_takes_the_cpu_torch_and_warns_of_a_rust_build(cli, indexes) -> None:
    proc, data = _plan(cli, indexes, glibc="2.28", arch="x86_64")
    assert proc.returncode == 0, proc.stderr
    pkgs = {p["name"]: p for p in data["packages"]}
    for name, version in (("torch", "2.10.0+cpu"), ("torchvision", "0.25.0+cpu"), ("torchaudio", "2.10.0+cpu")):
        assert pkgs[name]["version"] == version and pkgs[name]["index"] == "pytorch-cpu", pkgs[name]
        assert "+cpu" in pkgs[name]["file"] and pkgs[name]["size"]
    assert not [n for n in pkgs if n.startswith(("nvidia-", "cuda-")) or n == "triton"]
    assert pkgs["requests"]["version"] != "99.0"  # the PyTorch CPU index serves only the torch family
    assert pkgs["llguidance"]["outcome"] == "sdist" and pkgs["llguidance"]["backend"] == "maturin"
    rust = [w for w in data["warnings"] if w["id"] == "sdist-build" and w["package"] == "llguidance"]
    assert rust and "Rust" in rust[0]["message"]


def test_unreachable_and_unpublished_are_different_outcomes(cli, indexes) -> None:
    proc, data = _plan(cli, indexes, ascend="http://ascend.invalid/simple/")
    assert proc.returncode == 1
    ta = next(p for p in data["packages"] if p["name"] == "triton-ascend")
    assert ta["outcome"] == "unavailable"
    assert "could not be reached" in ta["reason"] and "ascend.invalid" in ta["reason"]
    proc, data = _plan(cli, indexes, ascend=indexes[0].url)
    assert proc.returncode == 1
    ta = next(p for p in data["packages"] if p["name"] == "triton-ascend")
    assert ta["outcome"] == "unavailable" and "no index serves triton-ascend==3.2.2" in ta["reason"]
    assert "has only 3.2.0" in ta["reason"]
    hole = BlackHole()
    try:
        proc, data = _plan(cli, indexes, ascend=hole.url)
    finally:
        hole.close()
    ta = next(p for p in data["packages"] if p["name"] == "triton-ascend")
    assert ta["outcome"] == "unavailable" and "could not be reached" in ta["reason"]


def test_plan_table_at_80_columns_and_the_lock(cli, indexes, tmp_path: Path) -> None:
    main, asc, torch_cpu, _ = indexes
    lock = tmp_path / "x86.lock"
    proc = cli(
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        "2.28",
        "--arch",
        "x86_64",
        "--python",
        "3.11",
        "--index-url",
        main.url,
        "--index",
        f"ascend={asc.url}",
        "--index",
        f"pytorch-cpu={torch_cpu.url}",
        "--lock",
        str(lock),
        env={"COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "packages" in lines[0] and "wheels" in lines[0] and "source builds" in lines[0]  # counts first
    table = [l for l in lines if l.startswith(("torch==", "torch-npu==", "prometheus-fastapi-instrumentator=="))]
    assert len(table) == 3 and all(len(l) <= 80 for l in table), table
    assert "pytorch-cpu" in next(l for l in table if l.startswith("torch=="))
    assert "llguidance-1.7.0.tar.gz" in proc.stdout  # file names on their own lines
    written = read_lock(lock)
    assert written.target.arch == "x86_64" and written.target.glibc == "2.28" and written.cann == "9.1.0"
    assert written.indexes["pytorch-cpu"] == torch_cpu.url and written.get("torch").version == "2.10.0+cpu"
    text = lock.read_text()
    assert "torch==2.10.0+cpu \\\n    --hash=sha256:" in text and f"# index pytorch-cpu: {torch_cpu.url}" in text


def test_plan_rows_are_never_cropped(capsys, monkeypatch) -> None:
    """The real index's longest name and version (40 and 16 characters) at 80 columns: every cell whole
    (a cropped table showed 'mirro' and '266.0'); narrower still, one plain line per package."""
    from ascend_setup.commands.plan import render_plan
    from ascend_setup.resolve.lockfile import Lock, LockedPackage, LockTarget

    packages = [
        LockedPackage(
            name="opentelemetry-exporter-otlp-proto-common",
            version="1.45.2",
            outcome="wheel",
            index="mirror",
            size=43_210,
        ),
        LockedPackage(name="certifi", version="2026.10.19.post1", outcome="wheel", index="mirror", size=1),
        LockedPackage(name="torch", version="2.10.0+cpu", outcome="wheel", index="pytorch-cpu", size=266_012_345),
        LockedPackage(
            name="triton-ascend",
            version="3.2.2",
            outcome="unavailable",
            index="ascend",
            reason="index 'ascend' could not be reached",
        ),
    ]
    lock = Lock(
        cann="9.1.0",
        target=LockTarget(arch="x86_64", glibc="2.28", python="3.11"),
        indexes={"mirror": "http://m/simple/", "ascend": "http://a/simple/", "pytorch-cpu": "http://p/simple/"},
        inputs="0",
        packages=packages,
    )
    cells = [
        ["opentelemetry-exporter-otlp-proto-common==1.45.2", "wheel", "0.0", "mirror"],
        ["certifi==2026.10.19.post1", "wheel", "0.0", "mirror"],
        ["torch==2.10.0+cpu", "wheel", "266.0", "pytorch-cpu"],
        ["triton-ascend==3.2.2", "unavailable", "-", "ascend"],
    ]
    for columns in (80, 50):
        monkeypatch.setenv("COLUMNS", str(columns))
        render_plan(lock)
        lines = capsys.readouterr().out.splitlines()
        for row in cells:
            (line,) = [l for l in lines if l.startswith(row[0] + " ")]
            assert line.split() == row, (columns, line)
            assert columns == 50 or len(line) <= 80


def test_bad_plan_input(cli) -> None:
    assert "--glibc" in assert_one_line_error(cli("plan", "--cann", "9.1.0", "--glibc", "2.x"))
    assert "--arch" in assert_one_line_error(cli("plan", "--cann", "9.1.0", "--arch", "sparc", "--glibc", "2.31"))
    assert "known versions" in assert_one_line_error(cli("plan", "--cann", "7.0.0"))
    assert "no index named 'nope'" in assert_one_line_error(cli("plan", "--cann", "9.1.0", "--index", "nope=http://x/"))
    assert "NAME=URL" in assert_one_line_error(cli("plan", "--cann", "9.1.0", "--index", "ascend"))


def test_forecast_for_this_host_equals_real_pip(cli, indexes, tmp_path: Path) -> None:
    """What pip resolves for the same root set (on one flat index, as pip has no per-package index)
    equals the lock for this host, package for package."""
    _main, _asc, _torch_cpu, eco = indexes
    arch, glibc = platform.machine(), glibc_version()
    python = probe(venv_python_for(ROW))  # this interpreter, or one in the row's range when this one is not
    assert python is not None
    proc, data = _plan(cli, indexes, glibc=glibc, arch=arch, python=python.minor)
    assert proc.returncode == 0, proc.stderr
    lock = {p["name"]: p["version"] for p in data["packages"] if p["name"] not in ("vllm", "vllm-ascend")}
    flat = tmp_path / "flat"
    shutil.copytree(eco.main, flat)
    for path in list(Path(eco.ascend).iterdir()) + [p for p in Path(eco.pytorch_cpu).iterdir() if "+cpu" in p.name]:
        shutil.copy(path, flat / path.name)
    server = LocalIndex()
    server.add_dir(flat)
    roots = tmp_path / "roots.txt"
    roots.write_text("\n".join(f"{n}=={v}" for n, v in lock.items()) + "\n")
    report = tmp_path / "report.json"
    try:
        done = subprocess.run(
            [
                python.path,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--report",
                str(report),
                "--index-url",
                server.url,
                "-r",
                str(roots),
            ],
            capture_output=True,
            text=True,
            env=clean_env(tmp_path),
            timeout=300,
        )
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-2000:]
    pip = {
        item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    pip.pop("triton", None)  # upstream triton: pip cannot exclude it; the lock substitutes triton-ascend
    assert pip == lock


def test_uv_is_handed_the_build_interpreter_and_asks_no_shim(indexes, tmp_path: Path, monkeypatch) -> None:
    """An interpreter of the target's Python at hand is given to uv: it no longer runs the python3.X it finds
    on PATH (behind pyenv's shims that cost 0.13 s of every uv run). Without one, uv looks as before."""
    from ascend_setup.dists.installers import uv_command
    from ascend_setup.index.tags import Target
    from ascend_setup.resolve.pythons import build_interpreter
    from ascend_setup.resolve.uvcompile import ClosureRequest, compile_closure

    minor = "%d.%d" % sys.version_info[:2]
    assert build_interpreter(minor) == sys.executable
    other = "3.10" if minor != "3.10" else "3.11"  # not this interpreter's (the tool runs on 3.8 too)
    assert build_interpreter(other, f"/opt/py/bin/python{other}") == f"/opt/py/bin/python{other}"
    assert build_interpreter(other) is None
    shims, ran = tmp_path / "shims", tmp_path / "shim-ran"
    shims.mkdir()
    for name in (f"python{minor}", "python3", "python"):
        (shims / name).write_text(f'#!/bin/sh\necho "$0" >> {ran}\nexec {sys.executable} "$@"\n')
        (shims / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    target = Target(glibc_version() or "2.17", platform.machine(), minor)
    settings = pip_settings()
    for given in (build_interpreter(minor), None):
        request = ClosureRequest(target=target, default_index=indexes[0].url, roots=["requests"], build_python=given)
        resolved = compile_closure(request, uv=uv_command(), network=settings, cache_dir=tmp_path / "uv")
        assert "requests" in {r.name for r in resolved}
        assert ran.exists() == (given is None), given
        ran.unlink(missing_ok=True)


def test_known_build_warnings_and_toolchains() -> None:
    assert any("z3-solver" in w for _, w in build_warnings(["z3-solver"], (2, 31), 40))
    assert not build_warnings(["z3-solver"], (2, 35), 40)
    assert build_warnings(["numpy"], (2, 31), 40) == []
    assert "Rust" in toolchain_for("maturin") and "Rust" in toolchain_for("setuptools.build_meta", ["setuptools-rust"])
    assert "CMake" in toolchain_for("scikit_build_core.build") and toolchain_for("hatchling.build") == ""


@pytest.mark.live
@pytest.mark.parametrize("glibc, arch, python", [("2.31", "aarch64", "3.11"), ("2.35", "x86_64", "3.12")])
def test_live_closure_on_the_public_index(cli, glibc, arch, python) -> None:
    public = pip_settings().index
    proc = cli(
        "plan",
        "--cann",
        "9.1.0",
        "--glibc",
        glibc,
        "--arch",
        arch,
        "--python",
        python,
        "--index-url",
        public,
        "--json",
        timeout=900,
    )
    data = json.loads(proc.stdout)
    pkgs = {p["name"]: p for p in data["packages"]}
    assert data["scope"] == "closure" and len(pkgs) > 150, proc.stderr
    for transitive in ("llvmlite", "starlette", "uvicorn"):
        assert pkgs[transitive]["outcome"] == "wheel", pkgs.get(transitive)
    from packaging.version import Version

    assert Version(pkgs["numpy"]["version"]) < Version("2.4")
    assert Version(pkgs["tokenizers"]["version"]) <= Version("0.23.0")
    assert Version(pkgs["prometheus-fastapi-instrumentator"]["version"]) < Version("8")
    if glibc == "2.31":
        assert pkgs["vllm-ascend"]["outcome"] == "sdist" and "glibc 2.34" in pkgs["vllm-ascend"]["reason"], pkgs[
            "vllm-ascend"
        ]
        assert any(w["package"] == "vllm-ascend" for w in data["warnings"])
    # the Ascend and PyTorch CPU indexes cannot be reached from everywhere: then those are unreachable,
    # not unpublished, and the rest of the closure is still forecast
    for p in data["packages"]:
        if p["outcome"] == "unavailable":
            assert p["index"] in ("ascend", "pytorch-cpu") and "could not be reached" in p["reason"], (
                p["name"],
                p["reason"],
            )
