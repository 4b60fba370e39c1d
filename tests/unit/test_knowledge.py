"""Root-cause triage: the first real cause in a long log, not its summaries."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascend_setup.knowledge.fixes import Host
from ascend_setup.knowledge.literals import required_literals
from ascend_setup.knowledge.scan import triage, triage_stream
from ascend_setup.knowledge.signatures import RESOLVER_BLOCKS, SIGNATURES
from ascend_setup.simulate.fake_cann import build_fake_cann
from ascend_setup.simulate.stub_plugin import build_stub_plugin_sdist
from ascend_setup.sourcebuild.source import extract_once

NOISE = "-- [cmake] checking feature: ok"


@pytest.mark.parametrize(
    "line, sig",
    [
        ("ModuleNotFoundError: No module named 'decorator'", "compiler-module-missing"),
        ("RuntimeError: Another process is using this dir: /x/kernel_meta", "compile-lock"),
        ("ERROR: No matching distribution found for triton-ascend==3.2.2", "triton-ascend-index"),
        ("ImportError: /lib/aarch64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found", "glibc-too-old"),
        ("TypeError: 'function' object is not subscriptable", "triton-shadowed"),
        ("AttributeError: '_OpNamespace' 'vllm' object has no attribute 'qkv_rmsnorm_rope'", "qkv-rmsnorm-rope"),
        ("npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file", "libc-sec"),
        ("OSError: libatb.so: cannot open shared object file: No such file or directory", "libatb"),
        ("AttributeError: 'Qwen3VLConfig' object has no attribute 'o_groups'", "fp8-ds-linear"),
    ],
)
def test_each_signature(line: str, sig: str) -> None:
    diagnosis = triage([NOISE] * 10 + [line] + [NOISE] * 10)
    assert diagnosis is not None and diagnosis.id == sig and diagnosis.line_number == 11
    assert diagnosis.fix and line in diagnosis.context


def test_first_real_cause_in_50000_lines() -> None:
    lines = [f"[{i}/50000] Building CXX object op_{i}.o" for i in range(1, 20000)]
    lines += [
        "Traceback (most recent call last):",
        '  File "tbe/common/utils.py", line 21',
        "ModuleNotFoundError: No module named 'decorator'",
    ]
    lines += [NOISE] * 29000
    lines += [
        "FAILED: CMakeFiles/vllm_ascend_C.dir/all",
        "ninja: build stopped: subcommand failed.",
        "ERROR: Engine core initialization failed. See root cause above.",
        "error: subprocess-exited-with-error",
    ]
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
    text = "\n".join(
        [
            NOISE,
            "FAILED: build.ninja",
            "ERROR: Engine core initialization failed",
            "error: subprocess-exited-with-error",
            "OSError: [Errno 5] Input/output error",
            NOISE,
        ]
    )
    diagnosis = triage(text.splitlines())
    assert diagnosis.id is None and "Input/output error" in diagnosis.cause
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
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(source), str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PATH": f"{bare}:{cann.toolkit}/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
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
    "Collecting torch==2.10.0",
    "  Using cached torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl (915.6 MB)",
    "Collecting torch-npu==2.10.0.post4",
    "  Downloading torch_npu-2.10.0.post4-cp311-cp311-manylinux_2_28_x86_64.whl (22.9 MB)",
    "INFO: pip is looking at multiple versions of torch-npu to determine which version is compatible.",
    "ERROR: Cannot install torch-npu==2.10.0.post4 and torch==2.10.0 because these package versions have "
    "conflicting dependencies.",
    "",
    "The conflict is caused by:",
    "    The user requested torch==2.10.0",
    "    torch-npu 2.10.0.post4 depends on torch==2.10.0+cpu",
    "",
    "To fix this you could try to:",
    "1. loosen the range of package versions you've specified",
    "2. remove package versions to allow pip to attempt to solve the dependency conflict",
    "",
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
    uv = [
        "error: No solution found when resolving dependencies",
        "  cause: Because torch-npu==2.10.0.post4 depends on torch==2.11.0 and you require torch==2.10.0, we can",
        "         conclude that your requirements are unsatisfiable.",
    ]
    diagnosis = triage(["Resolved 3 packages"] + uv)
    assert diagnosis.id == "uv-no-solution" and "your requirements are unsatisfiable" in diagnosis.render()


def test_a_warning_is_never_the_cause_while_an_error_line_exists() -> None:
    lines = RETRIES + ["Collecting x", "ERROR: Could not find a version that satisfies the requirement x==9"]
    diagnosis = triage(lines)
    assert diagnosis.id is None and diagnosis.line.startswith("ERROR: Could not find")
    only_warning = triage(RETRIES[:1])
    assert only_warning is not None and "NameResolutionError" in only_warning.line


LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
#: Each corpus log, the cause it must be triaged to, and the line that says so (tests/data/logs/README.md says
#: where each log came from). The clean log is a real successful build: it must name no cause.
CORPUS = [
    ("bisheng-missing.log", "bisheng-missing", 604),
    ("clean-compile-custom-kernels-0.log", None, None),
    ("cmake-too-old.log", "cmake-too-old", 4),
    ("compile-lock.log", "compile-lock", 7),
    ("compiler-module-missing.log", "compiler-module-missing", 9),
    ("compiler-oom.log", "compiler-oom", 43),
    ("device-infer.log", "device-infer", 10),
    ("device-type-mismatch.log", "device-type-mismatch", 18),
    ("dlog-missing.log", "dlog-missing", 602),
    ("fp8-ds-linear.log", "fp8-ds-linear", 15),
    ("gcc-too-old.log", "gcc-too-old", 3),
    ("glibc-too-old.log", "glibc-too-old", 6),
    ("graph-capture-streams.log", "graph-capture-streams", 14),
    ("hccl-socket-timeout.log", "hccl-socket-timeout", 14),
    ("kernel-meta-permission.log", "kernel-meta-permission", 8),
    ("libascend-hal.log", "libascend-hal", 5),
    ("libatb.log", "libatb", 7),
    ("libc-sec.log", "libc-sec", 3),
    ("libhccl.log", "libhccl", 9),
    ("no-space.log", "no-space", 24),
    ("pip-resolution-impossible.log", "pip-resolution-impossible", 18),
    ("qkv-rmsnorm-rope.log", "qkv-rmsnorm-rope", 16),
    ("root-dir-unset.log", "root-dir-unset", 541),
    ("setenv-bash-missing.log", "setenv-bash-missing", 601),
    ("soc-unknown.log", "soc-unknown", 26),
    ("source-shadow.log", "source-shadow", 8),
    ("torch-cpu-local-version.log", "torch-cpu-local-version", 13),
    ("torch-version.log", "torch-version", 49),
    ("triton-ascend-index.log", "triton-ascend-index", 3),
    ("triton-shadowed.log", "triton-shadowed", 19),
    ("undefined-symbol.log", "undefined-symbol", 8),
    ("uv-no-solution.log", "uv-no-solution", 3),
    ("vllm-dev-version.log", "vllm-dev-version", 8),
]


@pytest.mark.parametrize("name, cause, line_number", CORPUS)
def test_corpus_log_names_its_cause_on_its_line(name: str, cause: str, line_number: int) -> None:
    with (LOGS / name).open("rb") as stream:
        diagnosis = triage_stream(stream)
    if cause is None:
        assert diagnosis is None or diagnosis.id is None
        return
    assert diagnosis is not None and (diagnosis.id, diagnosis.line_number) == (cause, line_number)
    lines = (LOGS / name).read_text(errors="replace").splitlines()
    assert diagnosis.line == lines[line_number - 1] and diagnosis.line in diagnosis.context and diagnosis.fix


@pytest.mark.parametrize("name, cause, line_number", CORPUS)
def test_small_blocks_give_the_same_answer(name: str, cause: str, line_number: int) -> None:
    """Block edges (context split across reads, a window crossing a block) change nothing."""
    with (LOGS / name).open("rb") as whole, (LOGS / name).open("rb") as pieces:
        a, b = triage_stream(whole), triage_stream(pieces, chunk=97)
    assert (a and a.to_json()) == (b and b.to_json())


def test_every_corpus_log_names_a_signature_and_every_signature_has_an_example() -> None:
    """Causes that cannot be produced here (HCCL, DCMI, a card) have no log of ours: their examples are what the
    framing test (tests/unit/test_triage_framings.py) checks, in every prefix real logs carry."""
    ids = {s.id for s in (*SIGNATURES, *RESOLVER_BLOCKS)}
    assert {cause for _, cause, _ in CORPUS if cause} <= ids and len(ids) >= 60
    assert all(s.example for s in (*SIGNATURES, *RESOLVER_BLOCKS))
    assert all((LOGS / name).read_text().startswith(f"# corpus log {name[:-4]}: ") for name, _, _ in CORPUS)


def test_file_names_never_name_a_cause() -> None:
    """The real build_py copies split_qkv_rmsnorm_rope_simt.py before any compile output."""
    names = [
        "copying vllm_ascend/ops/triton/linearnorm/split_qkv_rmsnorm_rope_simt.py -> build/lib/vllm_ascend",
        "-- Installing: /opt/vllm_ascend/include/error_code.h",
        "Compiling tbe/common/error_manager.py",
        "[12/90] Building CXX object csrc/CMakeFiles/ops.dir/no_such_file_error.cpp.o",
    ]
    assert triage(names * 50) is None
    diagnosis = triage(names + ["csrc/build_aclnn.sh: line 5: ROOT_DIR: ROOT_DIR is not set"] + names)
    assert diagnosis.id == "root-dir-unset" and diagnosis.line_number == 5


def test_only_the_last_attempt_counts() -> None:
    first = ["=== build: first run ===", "ModuleNotFoundError: No module named 'decorator'", "[exit 1]"]
    second = ["=== build: retry after a failure ===", "g++: fatal error: Killed signal terminated program cc1plus"]
    diagnosis = triage([NOISE] + first + [NOISE] + second)
    assert diagnosis.id == "compiler-oom" and diagnosis.line_number == 7
    assert triage(first + ["=== build: retry ===", NOISE]) is None


def test_the_fix_fits_the_host() -> None:
    gcc = "x.cpp:3:6: error: 'optional' in namespace 'std' does not name a template type"
    ubuntu, euler = triage([gcc], host=Host(family="apt")), triage([gcc], host=Host(family="yum"))
    assert "apt-get install -y gcc-9 g++-9" in ubuntu.fix and "yum" not in ubuntu.fix
    assert "yum install -y gcc-toolset-10" in euler.fix and "apt-get" not in euler.fix
    assert "apt-get" in triage([gcc], host=Host()).fix and "yum" in triage([gcc], host=Host()).fix
    soc = "RuntimeError: Could not determine chip type automatically via 'npu-smi'."
    assert "ascend910_9391" in triage([soc], host=Host(device="A3")).fix
    a2 = triage([soc], host=Host(device="A2")).fix
    assert "ascend910b3" in a2 and "ascend910_9391" not in a2
    lib = triage(["ImportError: libhccl.so: cannot open shared object file"], host=Host(set_env="/opt/cann/set_env.sh"))
    assert "source /opt/cann/set_env.sh" in lib.fix


def test_a_binary_file_is_bad_input(tmp_path: Path) -> None:
    from ascend_setup.errors import BadInput

    (tmp_path / "x.bin").write_bytes(b"\x7fELF\x00\x00\x01" * 100)
    with pytest.raises(BadInput), (tmp_path / "x.bin").open("rb") as stream:
        triage_stream(stream)


def test_a_signatures_literal_guard_never_changes_what_it_matches() -> None:
    """The guards are read from each pattern: on every example line of every signature, the guarded search and the
    bare regex agree (a guard that dropped a match would hide a cause)."""
    lines = [line for sig in (*SIGNATURES, *RESOLVER_BLOCKS) for line in sig.example]
    assert all(sig.guards for sig in (*SIGNATURES, *RESOLVER_BLOCKS))
    for sig in (*SIGNATURES, *RESOLVER_BLOCKS):
        for line in lines:
            assert bool(sig.search(line)) == bool(sig.pattern.search(line)), (sig.id, line)
    assert required_literals(re.compile(r"(?:error code is|result =) ?(207004)")) == ("207004",)
    assert required_literals(re.compile(r"libatb\.so: cannot|EJ0003")) == ("libatb.so: cannot", "EJ0003")
    assert required_literals(re.compile(r"ab|x+")) is None and required_literals(re.compile("abc", re.I)) is None
