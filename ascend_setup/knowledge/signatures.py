"""Known failure signatures -> root cause -> fix. Shared by the build, install, doctor and `triage`.

Each signature is looked for only in error-shaped lines and in the lines an error block holds (see
`knowledge/scan.py`): a bare substring would also match the file names a build prints
(`copying .../split_qkv_rmsnorm_rope_simt.py`), and then every failure looks like the same one. The order of this
table decides only which signature names a line that several match.

Some causes are only visible from two lines together: `numpy-2.0.2` installed before CANN's 500001, a traceback
through a source tree that shadows the installed package. Such a signature `requires` a fact (FACTS) seen before
its error line; it also names the facts it shows as `evidence`. Each signature carries an `example`: the lines a
real log shows for it (the first line its pattern matches is the cause line); the framing test wraps each example
in every prefix real logs carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Match, Optional, Pattern, Sequence, Tuple

from ascend_setup.knowledge.fixes import Fix
from ascend_setup.knowledge.literals import required_literals


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: Pattern[str]
    cause: str
    fix: Fix
    example: Tuple[str, ...]
    requires: Tuple[str, ...] = ()  # facts that must have been seen before the error line
    evidence: Tuple[str, ...] = ()  # facts shown beside the error line when seen
    weak: bool = False  # named by a return code alone: a specific line of the CANN block after it wins
    guards: Tuple[str, ...] = ()  # a line the pattern matches holds one of these (read from the pattern)

    def search(self, text: str) -> Optional[Match[str]]:
        """The pattern's match, tested first with `in` on its literals: most lines hold none of them."""
        for guard in self.guards:  # a loop, not any(): this runs ~80 times per error line
            if guard in text:
                return self.pattern.search(text)
        return None if self.guards else self.pattern.search(text)


def _sig(
    id: str,
    pattern: str,
    cause: str,
    fix: Fix,
    example: Tuple[str, ...],
    requires: Tuple[str, ...] = (),
    evidence: Tuple[str, ...] = (),
    weak: bool = False,
) -> Signature:
    compiled = re.compile(pattern)
    return Signature(
        id, compiled, cause, fix, example, requires, evidence or requires, weak, required_literals(compiled) or ()
    )


#: Facts: earlier lines that change what an error means. A fact named `frame:...` is looked for only in the
#: frames of the traceback that ends in the error (a path there says which copy of a package ran).
FACTS: Mapping[str, Pattern[str]] = {
    "numpy2": re.compile(r"^Successfully installed .*\bnumpy-2\.|^numpy(?:\s+|==)2\.\d"),
    "torch-npu-version": re.compile(r"^Successfully installed .*\btorch[-_]npu-\d|^torch[-_]npu(?:\s+|==)\d\S*\s*$"),
    "frame:source-tree": re.compile(r'File "(?![^"]*-packages/)(?!<)[^"]*/(?:vllm|vllm_ascend|torch_npu)/[^"]*"'),
}

_CANN_PY_DEPS = "attrs cython numpy decorator sympy cffi pyyaml pathlib2 psutil protobuf scipy requests absl-py"
_SERVE_FP8 = "'{{\"ascend_compilation_config\": {{\"fuse_qknorm_rope\": false}}}}'"
#: Where the Ascend index is written once: the matrix (its named index `ascend`), not here.
_ASCEND_INDEX = "the row's Ascend index: 'ascend-setup matrix show CANN' names it"
_CONTAINER_MOUNTS = (
    "--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc "
    "-v /usr/local/dcmi:/usr/local/dcmi -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi "
    "-v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/ "
    "-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info "
    "-v /etc/ascend_install.info:/etc/ascend_install.info"
)
_TB = "Traceback (most recent call last):"
#: How torch_npu reports a device it cannot count (gpustack#2527, #3352); CANN's block after it says why.
_NO_DEVICE = (
    "RuntimeError: init:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:292 NPU function error: "
    "aclrtGetDeviceCount(&device_count), error code is 207004",
    "[ERROR] 2025-07-17-08:06:53 (PID:112081, Device:-1, RankID:-1) ERR00100 PTA call acl api failed",
    "[Error]: The device is unavailable.",
    "        Check whether the device is running properly.",
)

SIGNATURES: Sequence[Signature] = (
    # -- the build of vllm-ascend's custom operators ------------------------------------------------------------
    _sig(
        "root-dir-unset",
        r"ROOT_DIR: ROOT_DIR is not set",
        "setuptools < 67.1 runs setup.py with a relative __file__: ROOT_DIR comes out empty and "
        "csrc/build_aclnn.sh stops",
        Fix("pip install 'setuptools>=67.1' into the build venv, then rebuild (ascend-setup's build deps pin it)"),
        ("csrc/build_aclnn.sh: line 5: ROOT_DIR: ROOT_DIR is not set",),
    ),
    _sig(
        "soc-unknown",
        r"Could not determine chip type automatically via 'npu-smi'|"
        r"Unable to recognize chip name: (\S+), please manually set env SOC_VERSION",
        "setup.py could not read the SOC from npu-smi (no driver here, or a chip it does not know): the build "
        "needs SOC_VERSION",
        Fix(
            "pass the target with --soc (ascend-setup install --soc ...) or export SOC_VERSION",
            a2="SOC_VERSION=ascend910b3 (npu-smi's Chip Name, lowercased; A2 images use ascend910b1)",
            a3="SOC_VERSION=ascend910_9391 (Chip Name + '_' + NPU Name)",
        ),
        ("RuntimeError: Could not determine chip type automatically via 'npu-smi'.",),
    ),
    _sig(
        "setenv-bash-missing",
        r"bin/setenv\.bash: No such file or directory",
        "the CANN toolkit at ASCEND_HOME_PATH has no bin/setenv.bash: it is incomplete (no compiler), or "
        "ASCEND_HOME_PATH points at something else",
        Fix("source {set_env} (it sets ASCEND_HOME_PATH), or reinstall the full Ascend-cann-toolkit package"),
        ("build.sh: line 336: /usr/local/Ascend/cann-9.1.0/bin/setenv.bash: No such file or directory",),
    ),
    _sig(
        "bisheng-missing",
        r"bisheng compilation tool not found",
        "CANN's compiler `bisheng` is not on PATH: the toolkit's set_env.sh was not sourced, or the toolkit "
        "lacks its compiler",
        Fix(
            "source {set_env} before the build; if `which bisheng` stays empty, install the full "
            "Ascend-cann-toolkit (not only the runtime)"
        ),
        (
            "Error: bisheng compilation tool not found, Please check whether the cann package or environment "
            "variables are set.",
        ),
    ),
    _sig(
        "dlog-missing",
        r"Could NOT find dlog",
        "CMake found no dlog headers: the CANN toolkit's development files (include/) are missing",
        Fix(
            "install the complete Ascend-cann-toolkit package for this CANN version (its devel headers) and "
            "source {set_env}"
        ),
        ("CMake Error at cmake/FindDlog.cmake:20 (message):", "  Could NOT find dlog (missing: dlog_INCLUDE_DIR)"),
    ),
    _sig(
        "ascendc-kernel-compile",
        r"Output of ascend_compiler: (\S+?):\d+:\d+: error: (.*)",
        "CANN's AscendC compiler rejects vllm-ascend's custom kernel {0} ({1}): this CANN toolkit is not the version "
        "the vllm-ascend release was written for (CANN 8.2.RC1's AscendC changes broke earlier releases' kernels)",
        Fix(
            "build against the CANN version the vllm-ascend release pins (ascend-setup plan names it), or install a "
            "vllm-ascend release made for this CANN"
        ),
        (
            "Function AscendcCompiler at line 98, Command excution failed, the returnCode is non-zero!",
            "Output of ascend_compiler: /home/vllm-ascend/csrc/kernels/pos_encoding_kernels.cpp:357:9: error: use of "
            "undeclared identifier 'rope_custom_true_half'; did you mean 'rope_custom_true___cce_half'?",
        ),
    ),
    _sig(
        "cmake-too-old",
        r"CMake ([\d.]+) or higher is required\.\s+You are running version ([\d.]+)",
        "this CMake is {1}; the build needs {0} or newer",
        Fix(
            "pip install 'cmake>={0}' into the venv (its bin/ first on PATH); the distribution's cmake is older",
            apt="cmake (Ubuntu 20.04 ships 3.16: prefer the pip one)",
            yum="cmake3",
        ),
        (
            "CMake Error at CMakeLists.txt:1 (cmake_minimum_required):",
            "  CMake 3.26 or higher is required.  You are running version 3.16.3",
        ),
    ),
    _sig(
        "cxx-compiler-missing",
        r"No CMAKE_(?:CXX|C)_COMPILER could be found",
        "CMake found no C/C++ compiler",
        Fix(
            "install a C++ compiler (gcc/g++ 9 or newer) and rebuild", apt="build-essential g++", yum="gcc gcc-c++ make"
        ),
        ("CMake Error at CMakeLists.txt:14 (project):", "  No CMAKE_CXX_COMPILER could be found."),
    ),
    _sig(
        "gcc-too-old",
        r"unrecognized command[- ]line option '-std=c\+\+17'|"
        r"['‘](?:optional|string_view|variant|filesystem)['’] in namespace ['‘]std['’] does not name|"
        r"requires compiler and library support for the ISO C\+\+ 2017",
        "the C++ compiler is older than gcc 8 and lacks C++17",
        Fix(
            "install gcc/g++ 9 or newer and rebuild with CXX_COMPILER/C_COMPILER pointing at them",
            apt="gcc-9 g++-9",
            yum="gcc-toolset-10-gcc-c++ (then: source /opt/rh/gcc-toolset-10/enable)",
        ),
        ("x.cpp:3:6: error: 'optional' in namespace 'std' does not name a template type",),
    ),
    _sig(
        "compiler-oom",
        r"Killed signal terminated program (cc1plus|cc1)",
        "the compiler ({0}) was killed, almost always by the kernel's OOM killer: too many parallel jobs "
        "for this machine's memory",
        Fix(
            "rebuild with fewer jobs: ascend-setup install --jobs N, or MAX_JOBS=N (about one job per 4 GB of "
            "MemAvailable or of the container's memory limit, not of MemTotal)"
        ),
        ("g++: fatal error: Killed signal terminated program cc1plus",),
    ),
    _sig(
        "torch-version",
        r"Expected PyTorch version ([\d.]+)",
        "the venv's torch is not {0}: something displaced it (vllm's CUDA metadata does)",
        Fix("pip install --no-deps torch=={0}, then rebuild"),
        ("CMake Error at CMakeLists.txt:40 (message):", "  Expected PyTorch version 2.10.0, but found 2.11.0"),
    ),
    # a package Python finds as a bare directory: a broken install, or a same-named directory in the working dir
    _sig(
        "broken-namespace-package",
        r"cannot import name '(\w+)' from '([\w.]+)' \(unknown location\)",
        "'{1}' imports as an empty namespace package ('unknown location'): a broken or half-removed install of it, "
        "or a directory of that name in the working directory or on PYTHONPATH, hides the real one",
        Fix(
            "pip uninstall -y {1} (repeat until pip finds none), remove a stray {1}/ directory from site-packages or "
            "the working directory, then reinstall the row's {1} if you need it"
        ),
        ("ImportError: cannot import name 'AsyncEngineArgs' from 'vllm' (unknown location)",),
    ),
    # a source tree in the working directory: the compiled part is missing, or the traceback runs through it
    _sig(
        "source-shadow",
        r"No module named '(torch_npu\._C|vllm_ascend\.vllm_ascend_C)'",
        "'{0}' is missing because a source checkout in the working directory shadows the installed package",
        Fix("run from another directory (cd ~), or install the checkout (pip install -e .)"),
        ("ModuleNotFoundError: No module named 'torch_npu._C'",),
        evidence=("frame:source-tree",),
    ),
    _sig(
        "source-shadow",
        r"No module named '((?:torch_npu|vllm_ascend|vllm)\.[\w.]+)'|"
        r"cannot import name '\w+' from '((?:torch_npu|vllm_ascend|vllm)[\w.]*)'",
        "'{0}' is missing because a source tree (see the evidence line) shadows the installed package: Python "
        "imports it from the working directory, not from site-packages",
        Fix("run from another directory (cd ~ before vllm serve), or remove that tree from PYTHONPATH"),
        (
            _TB,
            '  File "/workspace/vllm/vllm/entrypoints/cli/main.py", line 7, in <module>',
            "    import vllm.entrypoints.cli.benchmark.main",
            "ModuleNotFoundError: No module named 'vllm.benchmarks.serve'",
        ),
        requires=("frame:source-tree",),
    ),
    _sig(
        "cann-te-not-importable",
        r"No module named '((?:te|tbe|te_fusion|op_gen|op_compile_tool)(?:\.[\w.]+)?)'",
        "CANN's operator-compiler Python packages ({0}) are not importable from this interpreter: the toolkit's "
        "set_env.sh (which puts its python/site-packages on PYTHONPATH) was not sourced in this shell",
        Fix(
            "source {set_env} in the shell that runs python/vllm; if it still fails, reinstall the toolkit's "
            "te/tbe wheels into this interpreter"
        ),
        ('[CANNKB][Tid:2440326]"ModuleNotFoundError: No module named \'tbe.common\'',),
    ),
    _sig(
        "triton-ascend-missing",
        r"No module named '(triton(?:\.[\w.]+)?)'",
        "'{0}' is missing: torch_npu (its inductor) or vllm-ascend needs triton-ascend's modules, and the "
        "triton here is upstream triton or a triton-ascend older than the one paired with this torch_npu",
        Fix(
            "pip uninstall -y triton triton-ascend, then install the triton-ascend the row pins, last "
            "(--extra-index-url, " + _ASCEND_INDEX + ")"
        ),
        ("torch._inductor.exc.InductorError: ModuleNotFoundError: No module named 'triton.language.extra.ascend'",),
    ),
    _sig(
        "vllm-plugin-mismatch",
        r"No module named '(vllm(?:_ascend)?\.[\w.]+)'|"
        r"cannot import name '(\w+)' from '(?:vllm|vllm_ascend)[\w.]*'",
        "'{0}' is missing: vllm and vllm-ascend come from different releases (or vllm from main)",
        Fix(
            "install the pair the row names: pip install --no-deps vllm==<row> first, then vllm-ascend==<row> "
            "(ascend-setup audit --venv DIR shows which one is off)"
        ),
        ("ImportError: cannot import name 'SamplingMetadata' from 'vllm.v1.sample.metadata'",),
    ),
    _sig(
        "compiler-module-missing",
        r"ModuleNotFoundError: No module named '([\w.]+)'",
        "a Python module is missing in the interpreter that runs CANN's operator compiler: '{0}'",
        Fix(
            "install the CANN Python dependencies into the venv (ascend-setup's cann-python-deps step), "
            "e.g. pip install {0} (all of them: " + _CANN_PY_DEPS + ")"
        ),
        ("ModuleNotFoundError: No module named 'decorator'",),
    ),
    _sig(
        "compile-lock",
        r"Another process is using this dir",
        "a stale kernel_meta.lock left by a killed build: the compiler compares pids, never liveness",
        Fix("rerun ascend-setup (it removes locks whose process is gone), or delete that kernel_meta.lock by hand"),
        ("RuntimeError: Another process is using this dir: /x/kernel_meta",),
    ),
    _sig(
        "kernel-meta-permission",
        r"PermissionError: \[Errno 13\] Permission denied: '[^']*kernel_meta|"
        r"os\.makedirs\(kernel_meta_dir\b",
        "the operator compiler writes kernel_meta/ into the working directory, and it is not writable "
        "(ModelArts starts services in /)",
        Fix("start from a writable directory (cd /tmp or your home), or set ASCEND_WORK_PATH to one"),
        ("PermissionError: [Errno 13] Permission denied: '//kernel_meta'",),
    ),
    # -- packages: indexes, resolvers, wheels -----------------------------------------------------------------
    _sig(
        "triton-ascend-index",
        r"No matching distribution found for triton-ascend",
        "triton-ascend at the row's version is only on the Ascend index, and a build-isolated sdist "
        "build cannot see it",
        Fix(
            "add the Ascend index (--extra-index-url, " + _ASCEND_INDEX + ") and build with --no-build-isolation "
            "(ascend-setup does both)"
        ),
        ("ERROR: No matching distribution found for triton-ascend==3.2.2",),
    ),
    _sig(
        "torch-npu-index",
        r"No matching distribution found for (torch[-_]npu)\s*==\s*(\S+)",
        "{0} {1} is not on this index: torch-npu's dev builds (and some post releases) are published only on the "
        "Ascend index",
        Fix("add the Ascend index (--extra-index-url, " + _ASCEND_INDEX + "), or install the torch-npu the row pins"),
        (
            "ERROR: Could not find a version that satisfies the requirement torch-npu==2.5.1.post1.dev20250619 "
            "(from versions: 2.5.1rc1, 2.5.1)",
            "ERROR: No matching distribution found for torch-npu==2.5.1.post1.dev20250619",
        ),
    ),
    _sig(
        "vllm-cuda-triton",
        r"(?:satisfies the requirement|No matching distribution found for) "
        r"triton(?![-\w])\s*(?:[=<>!~]=?\s*([\w.]+))?",
        "vLLM's PyPI wheel requires CUDA's triton {0}, which has no build for this machine (and must not be on "
        "an Ascend host: it shadows triton-ascend)",
        Fix(
            "install vllm without its CUDA requirements: pip install --no-deps vllm==<row> and the row's list "
            "(ascend-setup install does), or build it with VLLM_TARGET_DEVICE=empty pip install ."
        ),
        (
            'ERROR: Could not find a version that satisfies the requirement triton==3.2.0; platform_machine != '
            '"ppc64le" (from vllm) (from versions: none)',
        ),
    ),
    _sig(
        "torch-cpu-local-version",
        r"(?:depends on|requires|Requires-Dist:?)\s+(torch[\w-]*)\s*==\s*([\w.]+)\+cpu",
        "{0} {1}+cpu is required (torch-npu's x86_64 wheels ask for the +cpu build), and only the PyTorch CPU "
        "index serves +cpu builds; a PyPI mirror's x86_64 torch is the CUDA build",
        Fix(
            "take the torch family from the PyTorch CPU index: the row does so on x86_64 (pass "
            "--index pytorch-cpu=URL for a mirror of it)"
        ),
        (
            "error: No solution found when resolving dependencies",
            "  Because torch-npu==2.10.0 depends on torch==2.10.0+cpu and there is no version of torch==2.10.0+cpu, "
            "we can conclude that torch-npu==2.10.0 cannot be used.",
        ),
    ),
    _sig(
        "vllm-dev-version",
        r"InvalidVersion: Invalid version: '([^']*)'",
        "vLLM reports the version '{0}' (a source or dev build without its git tags), which the plugin "
        "cannot compare with the versions it supports",
        Fix(
            "install the row's vllm release (pip install --no-deps vllm==<row>), or build vllm from a tagged "
            "checkout with VLLM_TARGET_DEVICE=empty"
        ),
        (
            _TB,
            '  File "/venv/lib/python3.11/site-packages/vllm_ascend/utils.py", line 310, in vllm_version_is',
            "    return Version(vllm.__version__) == Version(target)",
            "packaging.version.InvalidVersion: Invalid version: 'dev'",
        ),
    ),
    _sig(
        "glibc-too-old-cann",
        r"(bisheng[\w-]*|ccec|ascendc[\w-]*)[^:\s]*: [^:]*: version `GLIBC_(2\.\d+)' not found",
        "CANN's compiler ({0}) needs glibc {1}, newer than this OS's: the toolkit is built for newer systems",
        Fix(
            "run it on an OS or in a container with glibc >= {1} (ldd --version shows this one's), or use the CANN "
            "release that supports this OS"
        ),
        (
            "/usr/local/Ascend/ascend-toolkit/latest/bisheng_toolkit/bishengir/bin/bishengir-compile: "
            "/usr/lib64/libm.so.6: version `GLIBC_2.29' not found (required by bishengir-compile)",
        ),
    ),
    _sig(
        "glibc-too-old",
        r"GLIBC_(2\.\d+)' not found",
        "a binary was built for glibc {0}, newer than this machine's",
        Fix("use wheels built for this glibc (see 'ascend-setup plan'), or build that package from source"),
        ("ImportError: /lib/aarch64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found",),
    ),
    # -- libraries at import time -----------------------------------------------------------------------------
    _sig(
        "libc-sec",
        r"libc_sec\.so: cannot open shared object file",
        "the NPU driver's libraries are not on LD_LIBRARY_PATH",
        Fix("add /usr/local/Ascend/driver/lib64/common and lib64/driver to LD_LIBRARY_PATH"),
        ("npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file",),
    ),
    _sig(
        "libatb",
        r"libatb\.so: cannot open shared object file",
        "NNAL (ATB) is not installed or its set_env.sh was not sourced",
        Fix("install Ascend-cann-nnal for this CANN version and source /usr/local/Ascend/nnal/atb/set_env.sh"),
        ("OSError: libatb.so: cannot open shared object file: No such file or directory",),
    ),
    _sig(
        "libhccl",
        r"libhccl\.so: cannot open shared object file",
        "the CANN toolkit's libraries are not on LD_LIBRARY_PATH: its set_env.sh was not sourced",
        Fix("source {set_env} (in the same shell, before python or vllm serve)"),
        ("ImportError: libhccl.so: cannot open shared object file: No such file or directory",),
    ),
    _sig(
        "libascend-hal",
        r"libascend_hal\.so: cannot open shared object file",
        "the NPU driver is not installed here, or not mounted into this container",
        Fix(
            "install the Ascend driver (Ascend-hdk-*-npu-driver), or start the container with the driver "
            "mounts: " + _CONTAINER_MOUNTS + " and --device /dev/davinciN"
        ),
        ("ImportError: libascend_hal.so: cannot open shared object file: No such file or directory",),
    ),
    _sig(
        "nnal-cann-mismatch",
        r"(lib(?:atb|tbe_adapter|atb_\w+|asdops\w*|lcal\w*)\.so): undefined symbol",
        "NNAL's {0} refers to a symbol the installed CANN does not have: NNAL (ATB) and the toolkit come from "
        "different CANN releases",
        Fix(
            "install the Ascend-cann-nnal package of the same CANN version as the toolkit and torch_npu, then "
            "source /usr/local/Ascend/nnal/atb/set_env.sh"
        ),
        (
            "OSError: /usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libtbe_adapter.so: undefined symbol: "
            "_ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb",
        ),
    ),
    _sig(
        "undefined-symbol",
        r"undefined symbol: (\S+)",
        "a compiled library refers to a symbol its neighbours do not have ({0}): torch, torch_npu, "
        "the CANN/NNAL release and the custom ops come from different rows",
        Fix(
            "take the whole row (ascend-setup audit --venv DIR shows which package is off), then rebuild the "
            "custom ops against it"
        ),
        ("ImportError: /x/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN6c10_npu3fooEi",),
    ),
    _sig(
        "python-too-old-pep604",
        r"unsupported operand type\(s\) for \|: '(?:type|NoneType|_?GenericAlias|"
        r"_SpecialForm|typing\.\w+)' and '(?:type|NoneType|_?GenericAlias|_SpecialForm|"
        r"typing\.\w+)'",
        "code written with `X | None` type annotations (PEP 604) runs on Python < 3.10, which cannot evaluate them",
        Fix(
            "use Python 3.10 or 3.11 for the venv (vllm-ascend >= 0.11 needs >= 3.10): python3 --version shows this one"
        ),
        ("TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'",),
    ),
    _sig(
        "torch-api-mismatch",
        r"incompatible (?:constructor|function) arguments",
        "Python code calls a torch API with arguments the compiled torch does not take: vLLM was written for a "
        "newer torch than the installed torch/torch_npu pair",
        Fix(
            "install the vllm release paired with this vllm-ascend (the row's pair, --no-deps), so vllm, torch "
            "and torch_npu are of one row"
        ),
        ("TypeError: __init__(): incompatible constructor arguments. The following argument types are supported:",),
    ),
    _sig(
        "torch-npu-unpaired",
        r"module 'torch_npu' has no attribute '(\w+)'",
        "torch_npu has no '{0}': the installed torch-npu is not the build the vllm-ascend release is paired with",
        Fix("install the torch-npu the row pins (pip install --no-deps torch-npu==<row>), with its torch"),
        (
            "torch-npu                                2.5.1rc1",
            "AttributeError: module 'torch_npu' has no attribute '_npu_flash_attention'",
        ),
        evidence=("torch-npu-version",),
    ),
    # -- CANN at start-up -------------------------------------------------------------------------------------
    _sig(
        "numpy2-cann",
        r"SetPrecisionMode|(?:error code is|result = ) ?500001",
        "CANN's graph engine fails to initialise (500001, ACL_ERROR_FAILURE) because numpy 2 is installed "
        "(see the evidence line): this CANN's Python side needs numpy < 2",
        Fix(
            "pip install 'numpy<2' into this venv (vllm-ascend's maintainers pin it with CANN 8.2; then check "
            "`python -c 'import torch_npu; torch_npu.npu.set_device(0)'`)"
        ),
        (
            "Successfully installed numpy-2.0.2 torch-npu-2.7.1",
            "RuntimeError: SetPrecisionMode:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:155 NPU function "
            "error: at_npu::native::AclSetCompileopt(aclCompileOpt::ACL_PRECISION_MODE, precision_mode), error "
            "code is 500001",
        ),
        requires=("numpy2",),
    ),
    _sig(
        "cann-init-env",
        r"\[Init\]\[Env\]init env failed|SetPrecisionMode|(?:error code is|result = ) ?500001",
        "CANN could not initialise its operator environment (500001, ACL_ERROR_FAILURE): its Python "
        "dependencies are missing from the interpreter that runs torch_npu",
        Fix("pip install " + _CANN_PY_DEPS + " (numpy < 2 for CANN 8.x) into that interpreter, and source {set_env}"),
        (
            "EH9999: Inner Error!",
            "EH9999  [Init][Env]init env failed![FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]",
        ),
    ),
    _sig(
        "soc-build-mismatch",
        r"the socversion (\S+) of bin package does not match the current device "
        r"socver[si]+on (\w+)",
        "the operator binaries were built for {0}, and this NPU is {1}",
        Fix(
            "use the image or wheel built for this device (the -310p/-a3 images), or build vllm-ascend from "
            "source for it (ascend-setup install --soc ...)"
        ),
        (
            "[ERROR] the socversion Ascend910B1 of bin package does not match the current device socverison "
            "Ascend310P3.",
        ),
    ),
    _sig(
        "soc-unsupported",
        r"[Cc]an ?not support soc_?version:? ?'?(\w*)|Unsupported soc[ _]version:? ?(\w*)",
        "this CANN or build does not support the SOC {0}",
        Fix(
            "install the CANN release and the vllm-ascend build made for this chip (ascend-setup install "
            "--soc ...); vllm-ascend supports A2, A3 and 300I Duo only: a first-generation Ascend 910 (reported as "
            "soc_version 104) is not supported"
        ),
        ("RuntimeError: Can not support soc_version: Ascend910_9392",),
    ),
    _sig(
        "triton-ascend-target",
        r"bishengir-compile: .*Cannot find option named '(Ascend\w+)'",
        "triton-ascend cannot compile for {0} (it does not support 310P)",
        Fix(
            "pip uninstall -y triton-ascend triton on 310P: vllm-ascend then takes its non-Triton paths "
            "(serve with --dtype float16)"
        ),
        (
            "triton.compiler.errors.MLIRCompilationError: ",
            "[ConvertLinalgRToBinary] encounters error:",
            "bishengir-compile: for the --target option: Cannot find option named 'Ascend310P1'!",
        ),
    ),
    _sig(
        "op-unsupported-on-soc",
        r"socVersion \[(\w+)\] does not support opType \[(\w+)\]",
        "the operator {1} has no kernel for {0}: the model needs an operator this chip lacks (Qwen3-MoE's "
        "MoeGatingTopKSoftmax on 310P)",
        Fix("serve a model this chip's kernels cover (a dense model on 310P), or use A2/A3 hardware"),
        (
            "RuntimeError: call aclnnMoeGatingTopKSoftmax failed, detail:EZ1001: [PID: 51715] Get regInfo failed, The "
            "binary_info_config.json of socVersion [ascend310p] does not support opType [MoeGatingTopKSoftmax].",
        ),
    ),
    _sig(
        "op-dtype-unsupported",
        r"(\w+) not implemented for DT_(\w+)",
        "the operator's input '{0}' has no kernel for {1}: the model runs in a dtype this operator does not support "
        "(W8A8 quantised matmuls take no float16 scale)",
        Fix(
            "serve with a --dtype the operator's list (the next lines) holds: --dtype bfloat16 for W8A8 weights on "
            "A2/A3 (with --mamba-ssm-cache-dtype bfloat16 for hybrid models); 310P has no bfloat16: float16 there"
        ),
        (
            "aclnnQuantMatmulWeightNz failed, error code is 161002",
            "AclNN_Parameter_Error(EZ1001):",
            "Tensor scale not implemented for DT_FLOAT16,",
            "should be in dtype support list",
            "[DT_UINT64, DT_BFLOAT16, DT_INT64, DT_FLOAT].",
        ),
    ),
    _sig(
        "cann-kernels-missing",
        r"Op (\w+) does not has any binary|read binary_info_config\.json failed|"
        r"check if the opp_kernel package is installed",
        "CANN's operator kernel package (Ascend-cann-kernels for this chip) is missing or not for this chip: "
        "operators have no binary (a first-generation Ascend 910 has none vllm-ascend supports)",
        Fix(
            "install the Ascend-cann-kernels package of this CANN version for this chip (910b on A2, the A3 kernels "
            "on A3, 310p on 300I) and source {set_env}; a first-generation Ascend 910 (Ascend-cann-kernels-910) is "
            "not supported by vllm-ascend: it needs A2/A3"
        ),
        ("EZ9999: Inner Error!", "EZ9999: 2024-05-17-18:46:14.721.067  Op Equal does not has any binary."),
    ),
    # -- serving: start-up and the first request --------------------------------------------------------------
    _sig(
        "no-context-set-device",
        r"The context is empty|Check whether acl\.rt\.set_context or acl\.rt\.set_device",
        "a thread or process used the NPU without calling set_device first (107002, ACL_ERROR_RT_CONTEXT_NULL: "
        "it has no context): a newly started worker thread allocates on the NPU",
        Fix(
            "call torch.npu.set_device(N) at the start of every thread and process that uses the NPU (as FastChat's "
            "fix does), before the first allocation"
        ),
        (
            "(allocate:torch_npu/csrc/core/npu/NPUCachingAllocator.cpp:2050 NPU error, error code is 107002",
            "[Error]: The context is empty.",
            "        Check whether acl.rt.set_context or acl.rt.set_device is called.",
        ),
    ),
    _sig(
        "device-type-mismatch",
        r"does not match the installed version's device type",
        "the installed vllm-ascend was built for another device type (the published 0.23.0 wheels say A2)",
        Fix(
            "rebuild vllm-ascend from source for this NPU (ascend-setup builds it with the SOC it reads)",
            a2="--soc ascend910b3 (or your chip's ascend910b*)",
            a3="--soc ascend910_9391 (or your chip's ascend910_93*): the public wheels are A2-only",
        ),
        (
            "AssertionError: Current device type: AscendDeviceType.A3 does not match the installed version's "
            "device type: AscendDeviceType.A2",
        ),
    ),
    _sig(
        "device-infer",
        r"Failed to infer device type",
        "vLLM found no platform: the ascend plugin did not load (torch_npu does not import, or vllm-ascend is "
        "not installed in this venv)",
        Fix("run python -c 'import torch_npu' in the venv and fix what it says; source {set_env}"),
        ("RuntimeError: Failed to infer device type",),
    ),
    _sig(
        "triton-shadowed",
        r"'function' object is not subscriptable",
        "upstream triton shadows triton-ascend: triton.jit returns a plain function",
        Fix("pip uninstall -y triton, then reinstall triton-ascend last (--force-reinstall --no-deps)"),
        ("TypeError: 'function' object is not subscriptable",),
    ),
    _sig(
        "qkv-rmsnorm-rope",
        r"no attribute '(?:triton_split_)?qkv_rmsnorm_m?rope'|No such operator "
        r"vllm::qkv_rmsnorm_rope",
        "torch.ops.vllm.qkv_rmsnorm_rope is missing from vllm-ascend 0.23.0's binaries on A2",
        Fix("serve with --additional-config " + _SERVE_FP8),
        ("AttributeError: '_OpNamespace' 'vllm' object has no attribute 'qkv_rmsnorm_rope'",),
    ),
    _sig(
        "fp8-ds-linear",
        r"has no attribute 'o_groups'",
        "vllm-ascend 0.23.0's FP8 path maps every linear layer to DeepSeek's ds_linear",
        Fix("use a ModelSlim W8A8 checkpoint (quant_model_description.json) instead of FP8"),
        ("AttributeError: 'Qwen3VLConfig' object has no attribute 'o_groups'",),
    ),
    _sig(
        "max-model-len-kv",
        r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be "
        r"stored in KV cache|To serve at least one request with the models's max seq len",
        "the model's max-model-len ({0}) needs more KV cache than the card has left after the weights",
        Fix(
            "serve with an explicit --max-model-len (ascend-setup fit MODEL gives one that fits), or raise "
            "--gpu-memory-utilization, or use a smaller/quantised model or more cards (--tp)"
        ),
        (
            "ValueError: The model's max seq len (262144) is larger than the maximum number of tokens that can be "
            "stored in KV cache (51200). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
            "when initializing the engine.",
        ),
    ),
    _sig(
        "kv-cache-no-memory",
        r"No available memory for the cache blocks|Available KV cache memory: -",
        "nothing is left for the KV cache: another process holds HBM on this card (--gpu-memory-utilization is "
        "a fraction of the whole card), or the weights alone fill it",
        Fix(
            "look at `npu-smi info` for processes on the card and stop them (or pick a free card with "
            "ASCEND_RT_VISIBLE_DEVICES); else more cards (--tp) or a quantised model"
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
        ),
    ),
    _sig(
        "npu-oom",
        r"NPU out of memory\. Tried to allocate ([\d.]+ ?\w+)",
        "the NPU ran out of memory allocating {0} (often the KV cache, through fragmentation)",
        Fix(
            "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True, and lower --gpu-memory-utilization or "
            "--max-num-seqs"
        ),
        ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity)",),
    ),
    _sig(
        "npu-forked-subprocess",
        r"Cannot re-initialize NPU in forked subprocess",
        "the NPU was initialised before vLLM forked its workers; a forked child cannot use it",
        Fix("export VLLM_WORKER_MULTIPROC_METHOD=spawn, and do not touch torch.npu before vLLM starts"),
        (
            "RuntimeError: Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must "
            "use the 'spawn' start method",
        ),
    ),
    _sig(
        "graph-capture-streams",
        r"Alloc sq cq fail",
        "graph capture ran out of NPU streams (the SQ/CQ pairs of the runtime; torch_npu's message reads like "
        "'check the remaining storage space', and it is not about disk): too many captured sizes for this "
        "model's layers",
        Fix(
            "capture fewer sizes: --compilation-config '{{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32]}}' "
            "(or --enforce-eager to confirm, never to measure speed); upgrade CANN/HDK"
        ),
        (
            "RuntimeError: capture_begin: NPU function error: AclmdlRICaptureBegin(capture_stream_, capture_mode), "
            "error code is 207005",
            "EE9999: Inner Error!",
            "EE9999[PID: 1802934] 2026-04-17-09:16:39.992.922 (EE9999):  [SqCqManage]Alloc sq cq fail, "
            "stream_id=1984, retCode=0x7020023.[FUNC:Setup][FILE:stream.cc][LINE:1]",
        ),
    ),
    _sig(
        "graph-capture-streams",
        r"error code is 20700[58]|runtime result = 20700[58]",
        "graph capture ran out of NPU streams (207005/207008: resource alloc fail / no stream resource; the "
        "message reads like 'check the remaining storage space', and it is not about disk): too many captured "
        "sizes for this model's layers",
        Fix(
            "capture fewer sizes: --compilation-config '{{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32]}}' "
            "(or --enforce-eager to confirm, never to measure speed); upgrade CANN/HDK"
        ),
        (
            "RuntimeError: capture_begin: NPU function error: c10_npu::acl::AclmdlRICaptureBegin(capture_stream_, "
            "capture_mode), error code is 207008",
        ),
        weak=True,
    ),
    _sig(
        "mla-heads-graph",
        r"MLA only support",
        "the MLA kernel in graph mode supports only some heads-per-KV-head ratios (DeepSeek): this TP size breaks it",
        Fix("choose a --tp that keeps numHeads/numKvHeads in {{32, 64, 128}}, or serve with --enforce-eager"),
        ("EZ9999: Inner Error!", "EZ9999  numHeads / numKvHeads = 8, MLA only support {32, 64, 128}"),
    ),
    _sig(
        "quantization-ascend-unknown",
        r"argument --quantization(?:/-q)?: invalid choice: 'ascend'",
        "vLLM does not know --quantization ascend: vllm-ascend registers it, and this vllm-ascend is older than "
        "the releases that do (or it is not installed in this venv)",
        Fix(
            "upgrade vllm-ascend to the row's release (ascend-setup audit --venv DIR shows the installed one) and "
            "follow its quantization guide"
        ),
        ("vllm serve: error: argument --quantization/-q: invalid choice: 'ascend' (choose from 'aqlm', 'awq')",),
    ),
    _sig(
        "ascend-quantizer",
        r"There is no available ascend quantizer",
        "the checkpoint is not a ModelSlim export vllm-ascend can load with --quantization ascend",
        Fix(
            "re-export the weights with ModelSlim (W8A8, quant_model_description.json), or drop "
            "--quantization ascend for compressed-tensors checkpoints"
        ),
        ("NotImplementedError: There is no available ascend quantizer.",),
    ),
    _sig(
        "chat-template-missing",
        r"default chat template is no longer allowed",
        "the model has no chat template (a base model), so /v1/chat/completions cannot format the request",
        Fix("send /v1/completions requests, or serve with --chat-template FILE"),
        (
            '{"object":"error","message":"As of transformers v4.44, default chat template is no longer allowed, '
            'so you must provide a chat template if the tokenizer does not define one.","type":"BadRequestError"}',
        ),
    ),
    # -- devices, containers ----------------------------------------------------------------------------------
    _sig(
        "device-setup-failed",
        r"(?:error code is|runtime result =|errorCode =|ret=) ?507033",
        "the runtime could not set up the NPU (507033, ACL_ERROR_RT_DEV_SETUP_ERROR): another process or "
        "container holds the card, or the driver/firmware is broken",
        Fix(
            "check `npu-smi info` (processes, health) and pick a free card with ASCEND_RT_VISIBLE_DEVICES; "
            "reinstall the driver and firmware if the card shows unhealthy"
        ),
        ("RuntimeError: c10_npu::SetDevice: NPU function error: aclrtSetDevice(device), error code is 507033",),
        weak=True,
    ),
    _sig(
        "visible-devices-range",
        r"set ASCEND_RT_VISIBLE_DEVICES:\[?([\d,]+)\]? error, input data rang\[(\d+)-(\d+)\)",
        "ASCEND_RT_VISIBLE_DEVICES={0} names a card outside the {2} this process can see: in a container the "
        "indexes count from 0 over the mounted /dev/davinci* only",
        Fix(
            "use 0-based indexes of the cards mounted into the container (ASCEND_RT_VISIBLE_DEVICES=0,1 for two "
            "cards), or mount the cards you name"
        ),
        _NO_DEVICE
        + (
            "EE1001: [PID: 42] 2025-11-18-09:33:13.673.064 The argument is invalid.Reason: set "
            "ASCEND_RT_VISIBLE_DEVICES:4 error, input data rang[0-2)",
        ),
    ),
    _sig(
        "visible-devices-order",
        r"set ASCEND_RT_VISIBLE_DEVICES:([\d,]+) error, it must be configured in "
        r"ascending order",
        "ASCEND_RT_VISIBLE_DEVICES={0} is not in ascending order: the runtime refuses it and sees no device",
        Fix(
            "list each card once, in ascending order (ASCEND_RT_VISIBLE_DEVICES=0,1,2,3); map ranks to cards "
            "with the order vLLM assigns, not with the variable"
        ),
        _NO_DEVICE
        + (
            "EE1001: [PID: 112081] 2025-07-17-08:06:53.296.370 The argument is invalid.Reason: set "
            "ASCEND_RT_VISIBLE_DEVICES:0,2,4,6,1,3,5,7 error, it must be configured in ascending order",
        ),
    ),
    _sig(
        "no-visible-npu",
        r"must be less than or equal to the number of visible devices \(0\)",
        "the process sees no NPU: no /dev/davinci* in this container, or the user lacks the HwHiAiUser group",
        Fix(
            "start the container with --device /dev/davinciN and the documented mounts ("
            + _CONTAINER_MOUNTS
            + "); on the host add the user to HwHiAiUser"
        ),
        ("AssertionError: local_world_size (8) must be less than or equal to the number of visible devices (0)",),
    ),
    _sig(
        "no-visible-npu",
        r"(?:error code is|runtime result =) ?207004",
        "the process sees no NPU (207004, ACL_ERROR_RT_NO_DEVICE): no /dev/davinci* in this container, "
        "ASCEND_RT_VISIBLE_DEVICES names none of the cards it has, or the user lacks the HwHiAiUser group",
        Fix(
            "start the container with --device /dev/davinciN and the documented mounts ("
            + _CONTAINER_MOUNTS
            + "); check ASCEND_RT_VISIBLE_DEVICES; on the host add the user to HwHiAiUser"
        ),
        _NO_DEVICE,
        weak=True,
    ),
    _sig(
        "dcmi-device-busy",
        r"because the device is used|ret is -8020",
        "the card is held by another container (DCMI -8020, resource occupied): an NPU serves one container",
        Fix(
            "stop the other container, or give each container its own cards (-e ASCEND_VISIBLE_DEVICES=N with "
            "the Ascend runtime, or --device /dev/davinciN)"
        ),
        ("dcmi model initialized failed, because the device is used. ret is -8020",),
    ),
    _sig(
        "dcmi-init-failed",
        r"dcmi module initialize failed\. ret is (-80\d\d)",
        "DCMI could not initialise ({0}; -8005 is an inner error): inside a container the card is usually "
        "used by another container, or the driver's device nodes are not all mounted",
        Fix(
            "free the card (one container per NPU), or start the container with --privileged=true or the full "
            "device list (" + _CONTAINER_MOUNTS + ")"
        ),
        ("dcmi module initialize failed. ret is -8005",),
    ),
    _sig(
        "dcmi-library-missing",
        r"DCMIError_LibraryNotFound|libdcmi\.so: cannot open shared object file",
        "the DCMI library (libdcmi.so, from the host's driver) is not in this container",
        Fix(
            "start the container with -v /usr/local/dcmi:/usr/local/dcmi and the other driver mounts "
            "(" + _CONTAINER_MOUNTS + ")"
        ),
        (
            _TB,
            '  File "/usr/local/lib/python3.11/dist-packages/gpustack_runtime/detector/pydcmi/__init__.py", '
            'line 746, in _LoadDcmiLibrary',
            "    raise DCMIError(DCMI_ERROR_LIBRARY_NOT_FOUND)",
            "gpustack_runtime.detector.pydcmi.DCMIError_LibraryNotFound: Library Not Found",
        ),
    ),
    _sig(
        "shm-too-small",
        r"memory available in /dev/shm|/dev/shm.{0,80}(?:No space left|too small)",
        "/dev/shm is too small (docker's default is 64 MB): the engine and Ray pass tensors through it",
        Fix("start the container with --shm-size=16g (or --ipc=host)"),
        (
            "ValueError: The configured object store size exceeds /dev/shm size. System memory request exceeds "
            "memory available in /dev/shm. Pass --shm-size to docker run",
        ),
    ),
    _sig(
        "driver-cann-mismatch",
        r"driver version.{0,40}(?:not match|mismatch|inconsisten|not supported|too low)|"
        r"(?:not|does not) support (?:the )?driver version|不支持驱动版本",
        "the CANN in this image does not support the host's NPU driver (the image holds CANN, the host the driver)",
        Fix(
            "read /usr/local/Ascend/driver/version.info on the host and use an image whose CANN supports that "
            "driver, or upgrade the host driver (Ascend-hdk) to the CANN's"
        ),
        ("RuntimeError: The driver version is not match the CANN version, please upgrade the driver",),
    ),
    _sig(
        "ray-npu-as-gpu",
        r"Current node has no NPU available",
        "Ray registered the cards as GPUs (ray start --num-gpus), so vLLM finds no NPU resource",
        Fix(
            "restart Ray without --num-gpus, with RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 and "
            "ASCEND_RT_VISIBLE_DEVICES set before `ray start`; `ray status` must show NPU"
        ),
        ("ValueError: Current node has no NPU available. current_node_resource={'CPU': 192.0, 'GPU': 8.0}",),
    ),
    # -- multi-node: HCCL -------------------------------------------------------------------------------------
    _sig(
        "hccl-port-in-use",
        r"listen on ip\[([^\]]*)\] and specific port\[(\d+)\] fail|EJ0003|"
        r"host nic listen start failed",
        "HCCL could not listen on {0}:{1}: the port is held by another process (a stale vllm from an earlier "
        "run, or a second job on this host); the socket timeouts that follow are its consequence",
        Fix(
            "kill the stale vllm/HCCL processes on every node (or give each job its own HCCL_IF_BASE_PORT), then "
            "restart all ranks"
        ),
        (
            "[ERROR] HCCL(2717288,python3):2025-07-23-03:47:57.070.463 [hccl_socket.cc:100] [2717288][HcclSocket]"
            "[Listen] socket type[1], listen on ip[192.0.2.10] and specific port[16666] fail. Please check the port "
            "status and whether the port is been using by other process.",
        ),
    ),
    _sig(
        "hccl-nic-down",
        r"EJ0002|The network port is down|ra rdma init failed",
        "an NPU's network port is down (HCCL could not bring up RDMA)",
        Fix(
            "check every card with `hccn_tool -i N -link -g` (must be UP) and `-net_health -g`; fix the cable or "
            "switch port, or restart the NIC"
        ),
        (
            "[ERROR] HCCL(3021,python3):2025-06-02-10:11:12.000.001 [network_manager.cc:210] [RaRdevInit]ra rdev "
            "init failed, return[-1]",
            "EJ0002: The network port is down.",
        ),
    ),
    _sig(
        "hccl-notify-timeout",
        r"EI0002|wait execution of the Notify register times out",
        "HCCL waited past HCCL_EXEC_TIMEOUT for a remote rank: that rank died, hangs, or lost its link",
        Fix(
            "find the first error of the other ranks (it is the cause); raise HCCL_EXEC_TIMEOUT only for slow start-up"
        ),
        (
            "EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not "
            "received the Notify record from remote rank [1].",
        ),
    ),
    _sig(
        "hccl-transport-init",
        r"EI0009|Transport init error",
        "HCCL could not create its transport between ranks (two ranks on one IP, or a wrong HCCL_IF_IP)",
        Fix("give each node its own HCCL_IF_IP and check the device IPs (`hccn_tool -i N -ip -g`)"),
        ("EI0009: Transport init error. Reason: Create Dest error.",),
    ),
    _sig(
        "hccl-topo-missing",
        r"EI0014",
        "HCCL could not read the driver's topology files: only driver/lib64 is mounted into the container",
        Fix("mount the whole /usr/local/Ascend/driver directory into the container"),
        ("EI0014: Failed to open the file atlas_350_3.json.",),
    ),
    _sig(
        "hccl-device-ip-unset",
        r"'device ip' is not set correctly|Get ipconf failed|hccn_tool: not found|"
        r"Failed to call hccn_tool",
        "HCCL cannot read the NPUs' device IPs: neither /etc/hccn.conf nor hccn_tool is in the container",
        Fix(
            "mount them: -v /etc/hccn.conf:/etc/hccn.conf -v /usr/local/Ascend/driver/tools/hccn_tool:"
            "/usr/local/Ascend/driver/tools/hccn_tool"
        ),
        (
            "[ERROR] HCCL(1,python):2025-01-01-00:00:00.000.000 [topoinfo.cc:1] [RanktablCheck] 'device ip' is not "
            "set correctly, must be set when multi Server or HCCL INTRA ROCE ENABLE enabled",
        ),
    ),
    _sig(
        "hccl-uid-unknown",
        r"HcclGetRootInfo\(&?\w*\), error code is 19|ra init failed, return\[19\]",
        "HCCL's RDMA set-up failed (19, network error) for a user the container does not know: the device "
        "nodes belong to HwHiAiUser (uid 1000) and this UID has no /etc/passwd entry",
        Fix("run as root or as a user with HwHiAiUser's uid/gid that the image's /etc/passwd lists"),
        ("RuntimeError: HcclGetRootInfo(&hcclID), error code is 19",),
    ),
    _sig(
        "gloo-connect",
        r"Gloo connectFullMesh failed|Unable to resolve hostname to a \(local\) address",
        "Gloo (vLLM's CPU process group) picked an interface the other nodes cannot reach",
        Fix(
            "export GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME and HCCL_SOCKET_IFNAME as the NIC of the cluster network "
            "(`ip addr`), and HCCL_IF_IP as its address, on every node"
        ),
        (
            "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
            "no error",
        ),
    ),
    _sig(
        "hccl-socket-timeout",
        r"EI0006|Getting socket times out|wait socket establish timeout",
        "HCCL timed out connecting the ranks: a node did not start, or the nodes talk over the wrong interface",
        Fix(
            "start every node within HCCL_CONNECT_TIMEOUT (default 120 s; raise it), set HCCL_IF_IP and "
            "GLOO_SOCKET_IFNAME/HCCL_SOCKET_IFNAME to the NIC of the cluster network; with Ray, "
            "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1"
        ),
        (
            "Get_Socket_Timeout(EI0006): Getting socket times out. Reason: 1. The remote does not initiate a "
            "connect request.",
        ),
    ),
    _sig(
        "no-space",
        r"No space left on device",
        "a disk is full",
        Fix("free space where the log says, or move the workdir to a larger persistent disk (--workdir)"),
        ("OSError: [Errno 28] No space left on device: '/mnt/x.whl'",),
    ),
)

#: The resolver's own explanation of a conflict: a block, shown whole. A specific signature inside it (a +cpu
#: requirement, say) names the cause instead.
RESOLVER_BLOCKS: Sequence[Signature] = (
    _sig(
        "pip-resolution-impossible",
        r"^ERROR: Cannot install |The conflict is caused by:|ResolutionImpossible",
        "pip found conflicting requirements",
        Fix("the conflicting requirements are listed above"),
        (
            "ERROR: Cannot install torch-npu==2.10.0.post4 and torch==2.11.0 because these package versions have "
            "conflicting dependencies.",
        ),
    ),
    _sig(
        "uv-no-solution",
        r"No solution found when resolving",
        "uv found no set of versions that meets every requirement",
        Fix("uv's explanation is shown above"),
        ("error: No solution found when resolving dependencies",),
    ),
)
