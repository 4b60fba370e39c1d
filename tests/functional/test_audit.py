"""`ascend-setup audit`: real venvs with fabricated dist-infos, one per rule, and a clean one."""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path
from typing import Dict

from helpers.cli import assert_one_line_error
from helpers.fake_dists import MATRIX, ROW, clean_venv, fake_install, make_venv

from ascend_setup.audit.findings import run_audit
from ascend_setup.simulate.ecosystem import PLUGIN_REQUIRES


def _ids(report) -> Dict[str, list]:
    found: Dict[str, list] = {}
    for f in report.findings:
        found.setdefault(f.id, []).append(f)
    return found


def test_clean_venv_passes(cli, tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v")
    report = run_audit(MATRIX, venv)
    assert not report.failed, [f.message for f in report.findings if f.severity == "error"]
    assert report.row.cann == "9.1.0" and "vllm-ascend 0.23.0 is installed" in report.row_reason
    infos = [f for f in report.findings if f.severity == "info"]
    assert {f.package for f in infos} >= {"torch", "flashinfer-python", "tilelang", "nvidia-cudnn-frontend"}
    assert all("on purpose" in f.message for f in infos)
    proc = cli("audit", "--venv", str(venv), "--json")
    assert proc.returncode == 0, proc.stdout
    data = json.loads(proc.stdout)
    assert data["row"] == "9.1.0" and data["row_reason"]
    assert {"id", "severity", "package", "message", "fix"} <= set(data["findings"][0])


def test_a_post_release_and_a_source_build_of_the_pins_are_said_not_fixed(tmp_path: Path) -> None:
    """The version policy: vllm-ascend 0.23.0.post1 picks the 0.23.0 row and passes; vllm 0.23.0+empty too."""
    venv = clean_venv(tmp_path / "v", override={"vllm-ascend": "0.23.0.post1", "vllm": "0.23.0+empty"})
    report = run_audit(MATRIX, venv)
    assert report.row.cann == "9.1.0" and "vllm-ascend 0.23.0.post1 is installed" in report.row_reason
    accepted = {f.package: f for f in _ids(report)["pin-accepted"]}
    assert set(accepted) == {"vllm", "vllm-ascend"} and all(f.severity == "info" for f in accepted.values())
    assert "a newer post release of the row's 0.23.0" in accepted["vllm-ascend"].message
    assert "source build (+empty)" in accepted["vllm"].message
    assert not any(step for step in report.plan if "vllm" in step)
    older = clean_venv(tmp_path / "w", override={"torch-npu": "2.10.0.post2"})
    npu = next(f for f in _ids(run_audit(MATRIX, older))["pin-differs"] if f.package == "torch-npu")
    assert npu.severity == "error"


def test_displaced_torch_and_cuda_variant(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v", override={"torch": "2.11.0", "torchvision": "0.25.0+cu130"})
    found = _ids(run_audit(MATRIX, venv))
    torch = next(f for f in found["pin-differs"] if f.package == "torch")
    assert torch.severity == "error" and "displaced, most likely by vllm's CUDA metadata" in torch.message
    assert torch.fix.endswith(f"torch=={ROW.packages['torch']}") and "--no-deps" in torch.fix
    assert found["cuda-build"][0].package == "torchvision"


def test_triton_shadowing(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v")
    fake_install(venv, "triton", "3.5.0", files={"triton/__init__.py": "", "triton/language/core.py": ""})
    report = run_audit(MATRIX, venv)
    found = _ids(report)
    assert "not subscriptable" in found["triton-upstream"][0].message
    assert "2 files under triton/" in found["triton-overlap"][0].message
    # one step: triton out and triton-ascend back in, so no state in between lacks a `triton` package
    assert "uninstall -y triton && " in report.plan[-1] and "triton-ascend==3.2.2" in report.plan[-1]
    assert "--force-reinstall" in report.plan[-1] and f"--index-url {MATRIX.index_url('ascend')}" in report.plan[-1]
    assert not any("install" in step and " triton==" in step for step in report.plan)
    missing = clean_venv(tmp_path / "w", skip=("triton-ascend",))
    assert "triton-ascend-missing" in _ids(run_audit(MATRIX, missing))


def test_cann_deps_missing_or_old(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v", skip=("decorator",), override={"sympy": "1.4"})
    found = _ids(run_audit(MATRIX, venv))
    assert [f.package for f in found["cann-dep-missing"]] == ["decorator"]
    assert found["cann-dep-old"][0].package == "sympy" and "1.5.1" in found["cann-dep-old"][0].message


def test_cuda_only_present(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v")
    fake_install(venv, "flashinfer-python", "0.6.12")
    fake_install(venv, "nvidia-cudnn-frontend", "1.19.1")
    report = run_audit(MATRIX, venv)
    assert {f.package for f in _ids(report)["cuda-only"]} == {"flashinfer-python", "nvidia-cudnn-frontend"}
    assert not report.failed  # a warning: dead weight, not a crash
    assert any("uninstall -y flashinfer-python nvidia-cudnn-frontend" in c for c in report.plan)


def test_broken_closure_like_pip_check(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v", override={"fastapi": "0.130.0"}, skip=("openai",))
    found = _ids(run_audit(MATRIX, venv))
    unmet = {f.package: f for f in found["requirement-unmet"]}
    assert "fastapi" in unmet and "vllm-ascend 0.23.0 requires fastapi<0.124.0" in unmet["fastapi"].message
    assert "openai" in unmet and "openai is missing" in unmet["openai"].message


def test_venv_shape_rules(tmp_path: Path) -> None:
    leaky = tmp_path / "leaky"
    make_venv(leaky, system_site_packages=True)
    found = _ids(run_audit(MATRIX, leaky))
    assert "system-site-packages" in found
    venv = clean_venv(tmp_path / "v")
    fake_install(venv, "numpy", "2.0.0", dist_dir="numpy-2.0.0.dist-info")
    arch = "aarch64" if platform.machine() == "x86_64" else "x86_64"
    fake_install(venv, "fastnative", "1.0", tag=f"cp311-cp311-manylinux_2_17_{arch}")
    fake_install(venv, "toonew", "1.0", tag=f"cp311-cp311-manylinux_2_99_{platform.machine()}")
    found = _ids(run_audit(MATRIX, venv))
    assert found["duplicate-dist"][0].package == "numpy"
    assert {f.package for f in found["wheel-platform"]} == {"fastnative", "toonew"}


def test_python_outside_range(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v")
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(
        "\n".join(l if not l.startswith("version") else "version = 3.9.18" for l in cfg.read_text().splitlines()) + "\n"
    )
    assert "python-range" in _ids(run_audit(MATRIX, venv))


def test_row_inference_and_override(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "v")
    fake_install(venv, "torch-npu", "2.10.0.post2")
    report = run_audit(MATRIX, venv)
    assert report.row.cann == "9.0.1" and "torch-npu 2.10.0.post2" in report.row_reason
    assert run_audit(MATRIX, venv, "9.1.0").row_reason == "chosen with --cann"


def test_audit_is_read_only(tmp_path: Path, cli) -> None:
    venv = clean_venv(tmp_path / "v", override={"torch": "2.11.0"})

    def snapshot():
        return {p: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None for p in sorted(venv.rglob("*"))}

    before = snapshot()
    proc = cli("audit", "--venv", str(venv))
    assert proc.returncode == 1 and "fix plan" in proc.stdout
    assert snapshot() == before


def test_not_a_venv(cli, tmp_path: Path) -> None:
    assert "is not a venv" in assert_one_line_error(cli("audit", "--venv", str(tmp_path)))
    assert "does not exist" in assert_one_line_error(cli("audit", "--venv", str(tmp_path / "x")))


def test_provenance(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v", skip=("vllm-ascend", "torch-npu"))
    fake_install(
        venv,
        "vllm-ascend",
        "0.23.0",
        requires=PLUGIN_REQUIRES,
        direct_url={"url": "file:///mnt/workspace/wheelhouse/vllm_ascend-0.23.0-py3-none-any.whl", "archive_info": {}},
    )
    fake_install(venv, "torch-npu", "2.10.0.post4", installer="conda")
    found = _ids(run_audit(MATRIX, venv))
    assert "wheelhouse" in found["direct-url"][0].message and found["direct-url"][0].severity == "info"
    assert found["foreign-installer"][0].package == "torch-npu"


def test_compressed_tag_sets_and_abi3_are_ordinary(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v")
    arch = platform.machine()
    fake_install(venv, "openai-harmony", "0.0.8", tag=f"cp38-abi3-manylinux_2_17_{arch}.manylinux2014_{arch}")
    fake_install(venv, "abi3only", "1.0", tag=f"cp39-abi3-manylinux_2_28_{arch}")
    assert "wheel-platform" not in _ids(run_audit(MATRIX, venv))


def test_cuda_only_package_that_a_kept_package_needs_is_info(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v", skip=("xgrammar",))
    fake_install(venv, "xgrammar", "0.2.0", requires=["apache-tvm-ffi"])
    fake_install(venv, "apache-tvm-ffi", "0.1.9")
    report = run_audit(MATRIX, venv)
    kept = _ids(report)["cuda-only-required"][0]
    assert kept.severity == "info" and kept.package == "apache-tvm-ffi" and "xgrammar -> apache-tvm-ffi" in kept.message
    assert "cuda-only" not in _ids(report) and not any("apache-tvm-ffi" in step for step in report.plan)


def test_cuda_torch_is_found_from_its_metadata_and_replaced_before_nvidia_goes(tmp_path: Path) -> None:
    nvidia = ["nvidia-cublas-cu12", "nvidia-cudnn-cu12"]
    venv = clean_venv(tmp_path / "v", skip=("torch", "torch-npu"))
    fake_install(
        venv,
        "torch",
        "2.10.0",
        requires=nvidia,
        files={"torch/__init__.py": "", "torch/version.py": "cuda: Optional[str] = '12.8'\n"},
    )
    for name in nvidia:
        fake_install(venv, name, "12.8.0")
    torch_cpu = ROW.packages["torch"]
    fake_install(venv, "torch-npu", "2.10.0.post4", requires=[f"torch=={torch_cpu}"])
    report = run_audit(MATRIX, venv)
    found = _ids(report)
    cuda = found["cuda-torch"][0]
    assert cuda.severity == "error" and "nvidia-cublas-cu12" in cuda.message and "cuda = 12.8" in cuda.message
    if "+cpu" in torch_cpu:  # x86_64: torch-npu's own requirement names the +cpu build
        assert found["row-requirement-unmet"][0].package == "torch-npu"
        assert "requires torch==2.10.0+cpu (installed: 2.10.0)" in found["row-requirement-unmet"][0].message
    pins = next(i for i, step in enumerate(report.plan) if f"torch=={torch_cpu}" in step)
    removal = next(i for i, step in enumerate(report.plan) if "uninstall -y" in step and "nvidia-cublas-cu12" in step)
    assert pins < removal  # torch stops importing nvidia before nvidia goes
    if ROW.index_of("torch") != "mirror":
        assert f"--index-url {MATRIX.index_url(ROW.index_of('torch'))}" in report.plan[pins]


def test_fix_plan_turns_system_site_packages_off_first(tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v", skip=("decorator",), override={"torch": "2.11.0"})
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(
        cfg.read_text().replace("include-system-site-packages = false", "include-system-site-packages = true")
    )
    plan = run_audit(MATRIX, venv).plan
    assert plan[0].startswith("sed -i") and "include-system-site-packages = false" in plan[0]
    assert any("decorator" in step for step in plan[1:]) and any("torch==" in step for step in plan[1:])


def test_audit_and_doctor_read_well_at_80_and_200_columns(cli, tmp_path: Path) -> None:
    venv = clean_venv(tmp_path / "v", override={"torch": "2.11.0"}, skip=("decorator",))
    fake_install(venv, "triton", "3.5.0", files={"triton/__init__.py": ""})
    for columns in ("80", "200"):
        for argv in (["audit", "--venv", str(venv)], ["doctor", "--workdir", str(tmp_path / "wd")]):
            out = cli(*argv, env={"COLUMNS": columns}).stdout
            lines = out.splitlines()
            wrapped = [
                l
                for l in lines
                if len(l) > int(columns)
                and " " in l.strip()[: int(columns)]
                and not l.lstrip().startswith(("1.", "2.", "3.", "4.", "5.", "6."))
            ]
            assert not wrapped, wrapped  # prose wraps at words; only a fix command may run long (to copy whole)
            text = " ".join(l.strip() for l in lines)
            for word in ("triton-ascend", "displaced,", "not subscriptable") if argv[0] == "audit" else ("libatb.so",):
                assert word in text, (columns, word)  # never broken mid-word
    assert len(cli("audit", "--venv", str(venv), env={"COLUMNS": "80"}).stdout.splitlines()) <= 60


def test_the_summary_keeps_errors_warnings_and_expected_notes_apart(cli, tmp_path: Path) -> None:
    from ascend_setup.audit.findings import summary

    assert summary(["info"] * 15) == "clean (15 expected notes)" and summary([]) == "clean"
    assert summary(["warning", "info", "info"]) == "clean, with 1 warning (2 expected notes)"
    assert summary(["error", "error", "info"]) == "NOT clean (2 errors, 1 expected note)"
    venv = clean_venv(tmp_path / "v")
    fake_install(venv, "apache-tvm-ffi", "0.1.9")  # an info: a CUDA-only package, kept on purpose or not
    full = cli("audit", "--venv", str(venv)).stdout
    quiet = cli("audit", "--venv", str(venv), "--quiet-info").stdout
    report = json.loads(cli("audit", "--venv", str(venv), "--json").stdout)
    infos = {f["id"] for f in report["findings"] if f["severity"] == "info"}
    others = {f["id"] for f in report["findings"] if f["severity"] != "info"}
    assert infos - others, report["findings"]
    assert f"audit: {report['summary']}" in quiet and "expected note" in report["summary"]
    assert all(i in full for i in infos) and not any(i in quiet for i in infos - others)


def test_audit_start_up_loads_no_http_or_triage_stack(tmp_path: Path) -> None:
    """audit's start-up is benchmarked against pipdeptree (benchmarks/audit.py): requests, tenacity and the
    failure triage cost more than the whole audit of 300 dists, and a read-only audit needs none of them."""
    import subprocess
    import sys

    venv = clean_venv(tmp_path / "v")
    probe = (
        "import sys\nfrom ascend_setup.cli.main import main\n"
        "try:\n    main(['audit', '--venv', sys.argv[1], '--json'])\nexcept SystemExit:\n    pass\n"
        "heavy = ['requests', 'tenacity', 'ascend_setup.index.http', 'ascend_setup.knowledge.scan']\n"
        "sys.stderr.write(repr([m for m in heavy if m in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, str(venv)], capture_output=True, text=True, timeout=120)
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr[-2000:]
    assert json.loads(proc.stdout)["row"] == "9.1.0"
