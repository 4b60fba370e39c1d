"""Root-cause triage: the first real cause in a long log, not its summaries."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.stub_plugin import build_stub_plugin_sdist
from ascend_setup.sourcebuild.source import extract_once
from ascend_setup.knowledge.signatures import triage

NOISE = "-- [cmake] checking feature: ok"


@pytest.mark.parametrize("line, sig", [
    ("ModuleNotFoundError: No module named 'decorator'", "compiler-module-missing"),
    ("RuntimeError: Another process is using this dir: /x/kernel_meta", "compile-lock"),
    ("  Expected PyTorch version 2.10.0, found 2.11.0", "torch-version"),
    ("ERROR: No matching distribution found for triton-ascend==3.2.2", "triton-ascend-index"),
    ("ImportError: /lib/aarch64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found", "glibc-too-old"),
    ("TypeError: 'function' object is not subscriptable", "triton-shadowed"),
    ("AttributeError: '_OpNamespace' 'vllm' object has no attribute 'qkv_rmsnorm_rope'", "qkv-rmsnorm-rope"),
    ("npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file", "libc-sec"),
    ("OSError: libatb.so: cannot open shared object file: No such file or directory", "libatb"),
    ("AttributeError: 'Qwen3VLConfig' object has no attribute 'o_groups'", "fp8-ds-linear"),
])
def test_each_signature(line: str, sig: str) -> None:
    diagnosis = triage([NOISE] * 10 + [line] + [NOISE] * 10)
    assert diagnosis is not None and diagnosis.id == sig and diagnosis.line_number == 11
    assert diagnosis.fix and line in diagnosis.context


def test_first_real_cause_in_50000_lines() -> None:
    lines = [f"[{i}/50000] Building CXX object op_{i}.o" for i in range(1, 20000)]
    lines += ["Traceback (most recent call last):", '  File "tbe/common/utils.py", line 21',
              "ModuleNotFoundError: No module named 'decorator'"]
    lines += [NOISE] * 29000
    lines += ["FAILED: CMakeFiles/vllm_ascend_C.dir/all", "ninja: build stopped: subcommand failed.",
              "ERROR: Engine core initialization failed. See root cause above.", "error: subprocess-exited-with-error"]
    lines += [NOISE] * (50000 - len(lines))
    assert len(lines) == 50000
    start = time.perf_counter()
    diagnosis = triage(lines)
    assert time.perf_counter() - start < 2
    assert diagnosis.id == "compiler-module-missing" and diagnosis.line_number == 20002
    assert "'decorator'" in diagnosis.cause and "pip install decorator" in diagnosis.fix
    assert "Traceback (most recent call last):" in diagnosis.context
    assert "log line 20002" in diagnosis.render()


def test_summaries_are_not_causes() -> None:
    text = "\n".join([NOISE, "FAILED: build.ninja", "ERROR: Engine core initialization failed",
                      "error: subprocess-exited-with-error", "OSError: [Errno 28] No space left on device", NOISE])
    diagnosis = triage(text.splitlines())
    assert diagnosis.id == "unknown" and "No space left on device" in diagnosis.cause
    assert triage([NOISE]) is None


def test_stub_build_without_decorator_is_triaged(tmp_path: Path) -> None:
    """The stub plugin's real build output (no decorator in the reach of the `python3` CANN's compiler is
    given) is triaged right."""
    sdist = build_stub_plugin_sdist(tmp_path, "0.23.0", [])
    source = extract_once(sdist, tmp_path / "src")
    cann = build_fake_cann(tmp_path / "Ascend")
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    (bare / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")  # no site-packages
    (bare / "python3").chmod(0o755)
    code = "import sys; sys.path.insert(0, sys.argv[1]); import _stub_backend; _stub_backend.build_wheel(sys.argv[2])"
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(source), str(tmp_path)],
                          capture_output=True, text=True,
                          env={"PATH": f"{bare}:{cann.toolkit}/bin:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode != 0
    lines = proc.stdout.splitlines()
    assert len(lines) > 250 and lines[-1].startswith("-- [cmake]")  # the cause is buried, not last
    diagnosis = triage(lines)
    assert diagnosis.id == "compiler-module-missing" and "'decorator'" in diagnosis.cause


RETRIES = [
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken "
    "by 'NameResolutionError(\"<pip._vendor.urllib3.connection.HTTPSConnection object>: Failed to resolve "
    "'ascend.invalid' ([Errno -2] Name or service not known)\")': /simple/torch-npu/",
] * 5
#: What pip 25 printed on x86_64 for torch-npu with the PyPI torch (the real text, index names elided).
PIP_CONFLICT = [
    "Collecting torch==2.10.0", "  Using cached torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl (915.6 MB)",
    "Collecting torch-npu==2.10.0.post4",
    "  Downloading torch_npu-2.10.0.post4-cp311-cp311-manylinux_2_28_x86_64.whl (22.9 MB)",
    "INFO: pip is looking at multiple versions of torch-npu to determine which version is compatible.",
    "ERROR: Cannot install torch-npu==2.10.0.post4 and torch==2.10.0 because these package versions have "
    "conflicting dependencies.", "",
    "The conflict is caused by:", "    The user requested torch==2.10.0",
    "    torch-npu 2.10.0.post4 depends on torch==2.10.0+cpu", "",
    "To fix this you could try to:", "1. loosen the range of package versions you've specified",
    "2. remove package versions to allow pip to attempt to solve the dependency conflict", "",
    "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/",
]


def test_cpu_local_version_conflict_is_its_own_cause_not_the_retry_warning() -> None:
    diagnosis = triage(RETRIES + PIP_CONFLICT)
    assert diagnosis.id == "torch-cpu-local-version"
    assert "torch 2.10.0+cpu" in diagnosis.cause and "PyTorch CPU index" in diagnosis.cause
    assert "--index pytorch-cpu=URL" in diagnosis.fix
    assert "depends on torch==2.10.0+cpu" in diagnosis.line


def test_a_resolver_conflict_shows_its_block() -> None:
    conflict = [line.replace("torch==2.10.0+cpu", "numpy<2") for line in PIP_CONFLICT]
    diagnosis = triage(RETRIES + conflict)
    assert diagnosis.id == "pip-resolution-impossible" and diagnosis.line.startswith("ERROR: Cannot install")
    rendered = diagnosis.render()
    assert "The conflict is caused by:" in rendered and "depends on numpy<2" in rendered
    assert "The user requested torch==2.10.0" in rendered and "Retrying" not in rendered
    uv = ["  × No solution found when resolving dependencies:",
          "  ╰─▶ Because torch-npu==2.10.0.post4 depends on torch==2.11.0 and you require torch==2.10.0, we can",
          "      conclude that your requirements are unsatisfiable."]
    diagnosis = triage(["Resolved 3 packages"] + uv)
    assert diagnosis.id == "uv-no-solution" and "your requirements are unsatisfiable" in diagnosis.render()


def test_a_warning_is_never_the_cause_while_an_error_line_exists() -> None:
    lines = RETRIES + ["Collecting x", "ERROR: Could not find a version that satisfies the requirement x==9"]
    diagnosis = triage(lines)
    assert diagnosis.id == "unknown" and diagnosis.line.startswith("ERROR: Could not find")
    only_warning = triage(RETRIES[:1])
    assert only_warning is not None and "NameResolutionError" in only_warning.line
