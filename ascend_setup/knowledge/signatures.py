"""Known failure signatures -> root cause -> fix. Shared by the build, install, doctor and `triage`.

Each signature is looked for only in error-shaped lines (see `knowledge/scan.py`): a bare substring would also
match the file names a build prints (`copying .../split_qkv_rmsnorm_rope_simt.py`), and then every failure looks
like the same one. The order of this table decides only which signature names a line that several match.
Every cause has a log in tests/data/logs/ (its header says where the log came from).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Pattern, Sequence

from ascend_setup.knowledge.fixes import Fix


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: Pattern[str]
    cause: str
    fix: Fix


def _sig(id: str, pattern: str, cause: str, fix: Fix) -> Signature:
    return Signature(id, re.compile(pattern), cause, fix)


_CANN_PY_DEPS = "attrs cython numpy decorator sympy cffi pyyaml pathlib2 psutil protobuf scipy requests absl-py"
_SERVE_FP8 = "'{{\"ascend_fusion_config\": {{\"fuse_qknorm_rope\": false}}}}'"

SIGNATURES: Sequence[Signature] = (
    # -- the build of vllm-ascend's custom operators ------------------------------------------------------------
    _sig("root-dir-unset", r"ROOT_DIR: ROOT_DIR is not set",
         "setuptools < 67.1 runs setup.py with a relative __file__: ROOT_DIR comes out empty and "
         "csrc/build_aclnn.sh stops",
         Fix("pip install 'setuptools>=67.1' into the build venv, then rebuild (ascend-setup's build deps pin it)")),
    _sig("soc-unknown", r"Could not determine chip type automatically via 'npu-smi'|"
                        r"Unable to recognize chip name: (\S+), please manually set env SOC_VERSION",
         "setup.py could not read the SOC from npu-smi (no driver here, or a chip it does not know): the build "
         "needs SOC_VERSION",
         Fix("pass the target with --soc (ascend-setup install --soc ...) or export SOC_VERSION",
             a2="SOC_VERSION=ascend910b3 (npu-smi's Chip Name, lowercased; A2 images use ascend910b1)",
             a3="SOC_VERSION=ascend910_9391 (Chip Name + '_' + NPU Name)")),
    _sig("setenv-bash-missing", r"bin/setenv\.bash: No such file or directory",
         "the CANN toolkit at ASCEND_HOME_PATH has no bin/setenv.bash: it is incomplete, or ASCEND_HOME_PATH "
         "points at something else",
         Fix("source {set_env} (it sets ASCEND_HOME_PATH), or reinstall the Ascend-cann-toolkit package")),
    _sig("bisheng-missing", r"bisheng compilation tool not found",
         "CANN's compiler `bisheng` is not on PATH: the toolkit's set_env.sh was not sourced, or the toolkit "
         "lacks its compiler",
         Fix("source {set_env} before the build; if `which bisheng` stays empty, install the full "
             "Ascend-cann-toolkit (not only the runtime)")),
    _sig("dlog-missing", r"Could NOT find dlog",
         "CMake found no dlog headers: the CANN toolkit's development files (include/) are missing",
         Fix("install the complete Ascend-cann-toolkit package for this CANN version (its devel headers) and "
             "source {set_env}")),
    _sig("cmake-too-old", r"CMake ([\d.]+) or higher is required\.\s+You are running version ([\d.]+)",
         "this CMake is {1}; the build needs {0} or newer",
         Fix("pip install 'cmake>={0}' into the venv (its bin/ first on PATH); the distribution's cmake is older",
             apt="cmake (Ubuntu 20.04 ships 3.16: prefer the pip one)", yum="cmake3")),
    _sig("gcc-too-old", r"unrecognized command[- ]line option '-std=c\+\+17'|"
                        r"['‘](?:optional|string_view|variant|filesystem)['’] in namespace ['‘]std['’] does not name|"
                        r"requires compiler and library support for the ISO C\+\+ 2017",
         "the C++ compiler is older than gcc 8 and lacks C++17",
         Fix("install gcc/g++ 9 or newer and rebuild with CXX_COMPILER/C_COMPILER pointing at them",
             apt="gcc-9 g++-9", yum="gcc-toolset-10-gcc-c++ (then: source /opt/rh/gcc-toolset-10/enable)")),
    _sig("compiler-oom", r"Killed signal terminated program (cc1plus|cc1)",
         "the compiler ({0}) was killed, almost always by the kernel's OOM killer: too many parallel jobs "
         "for this machine's memory",
         Fix("rebuild with fewer jobs: ascend-setup install --jobs N, or MAX_JOBS=N (about one job per 4 GB of "
             "MemAvailable or of the container's memory limit, not of MemTotal)")),
    _sig("torch-version", r"Expected PyTorch version ([\d.]+)",
         "the venv's torch is not {0}: something displaced it (vllm's CUDA metadata does)",
         Fix("pip install --no-deps torch=={0}, then rebuild")),
    _sig("source-shadow", r"No module named '(torch_npu\._C|vllm_ascend\.vllm_ascend_C)'",
         "'{0}' is missing because a source checkout in the working directory shadows the installed package",
         Fix("run from another directory (cd ~), or install the checkout (pip install -e .)")),
    _sig("compiler-module-missing", r"ModuleNotFoundError: No module named '([\w.]+)'",
         "a Python module is missing in the interpreter that runs CANN's operator compiler: '{0}'",
         Fix("install the CANN Python dependencies into the venv (ascend-setup's cann-python-deps step), "
             "e.g. pip install {0} (all of them: " + _CANN_PY_DEPS + ")")),
    _sig("compile-lock", r"Another process is using this dir",
         "a stale kernel_meta.lock left by a killed build: the compiler compares pids, never liveness",
         Fix("rerun ascend-setup (it removes locks whose process is gone), or delete that kernel_meta.lock by hand")),
    _sig("kernel-meta-permission", r"PermissionError: \[Errno 13\] Permission denied: '[^']*kernel_meta",
         "the operator compiler writes kernel_meta/ into the working directory, and it is not writable "
         "(ModelArts starts services in /)",
         Fix("start from a writable directory (cd /tmp or your home), or set ASCEND_WORK_PATH to one")),
    # -- packages: indexes, resolvers, wheels -----------------------------------------------------------------
    _sig("triton-ascend-index", r"No matching distribution found for triton-ascend",
         "triton-ascend at the row's version is only on the Ascend index, and a build-isolated sdist "
         "build cannot see it",
         Fix("add the Ascend index (--extra-index-url) and build with --no-build-isolation (ascend-setup does both)")),
    _sig("torch-cpu-local-version", r"(?:depends on|requires|Requires-Dist:?)\s+(torch[\w-]*)\s*==\s*([\w.]+)\+cpu",
         "{0} {1}+cpu is required (torch-npu's x86_64 wheels ask for the +cpu build), and only the PyTorch CPU "
         "index serves +cpu builds; a PyPI mirror's x86_64 torch is the CUDA build",
         Fix("take the torch family from the PyTorch CPU index: the row does so on x86_64 (pass "
             "--index pytorch-cpu=URL for a mirror of it)")),
    _sig("vllm-dev-version", r"InvalidVersion: Invalid version: '([^']*)'",
         "vLLM reports the version '{0}' (a source or dev build without its git tags), which the plugin "
         "cannot compare with the versions it supports",
         Fix("install the row's vllm release (pip install --no-deps vllm==<row>), or build vllm from a tagged "
             "checkout with VLLM_TARGET_DEVICE=empty")),
    _sig("glibc-too-old", r"GLIBC_(2\.\d+)' not found",
         "a binary was built for glibc {0}, newer than this machine's",
         Fix("use wheels built for this glibc (see 'ascend-setup plan'), or build that package from source")),
    # -- libraries at import time -----------------------------------------------------------------------------
    _sig("libc-sec", r"libc_sec\.so: cannot open shared object file",
         "the NPU driver's libraries are not on LD_LIBRARY_PATH",
         Fix("add /usr/local/Ascend/driver/lib64/common and lib64/driver to LD_LIBRARY_PATH")),
    _sig("libatb", r"libatb\.so: cannot open shared object file",
         "NNAL (ATB) is not installed or its set_env.sh was not sourced",
         Fix("install Ascend-cann-nnal for this CANN version and source /usr/local/Ascend/nnal/atb/set_env.sh")),
    _sig("libhccl", r"libhccl\.so: cannot open shared object file",
         "the CANN toolkit's libraries are not on LD_LIBRARY_PATH: its set_env.sh was not sourced",
         Fix("source {set_env} (in the same shell, before python or vllm serve)")),
    _sig("libascend-hal", r"libascend_hal\.so: cannot open shared object file",
         "the NPU driver is not installed here, or not mounted into this container",
         Fix("install the Ascend driver (Ascend-hdk-*-npu-driver), or run the container with "
             "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro and the /dev/davinci* devices")),
    _sig("undefined-symbol", r"undefined symbol: (\S+)",
         "a compiled library refers to a symbol its neighbours do not have ({0}): torch, torch_npu, "
         "the CANN/NNAL release and the custom ops come from different rows",
         Fix("take the whole row (ascend-setup audit --venv DIR shows which package is off), then rebuild the "
             "custom ops against it")),
    # -- serving ----------------------------------------------------------------------------------------------
    _sig("device-type-mismatch", r"does not match the installed version's device type",
         "the installed vllm-ascend was built for another device type (the published 0.23.0 wheels say A2)",
         Fix("rebuild vllm-ascend from source for this NPU (ascend-setup builds it with the SOC it reads)",
             a2="--soc ascend910b3 (or your chip's ascend910b*)",
             a3="--soc ascend910_9391 (or your chip's ascend910_93*): the public wheels are A2-only")),
    _sig("device-infer", r"Failed to infer device type",
         "vLLM found no platform: the ascend plugin did not load (torch_npu does not import, or vllm-ascend is "
         "not installed in this venv)",
         Fix("run python -c 'import torch_npu' in the venv and fix what it says; source {set_env}")),
    _sig("triton-shadowed", r"'function' object is not subscriptable",
         "upstream triton shadows triton-ascend: triton.jit returns a plain function",
         Fix("pip uninstall -y triton, then reinstall triton-ascend last (--force-reinstall --no-deps)")),
    _sig("qkv-rmsnorm-rope", r"no attribute 'qkv_rmsnorm_rope'|No such operator vllm::qkv_rmsnorm_rope",
         "torch.ops.vllm.qkv_rmsnorm_rope is missing from vllm-ascend 0.23.0's binaries on A2",
         Fix("serve with --additional-config " + _SERVE_FP8)),
    _sig("fp8-ds-linear", r"has no attribute 'o_groups'",
         "vllm-ascend 0.23.0's FP8 path maps every linear layer to DeepSeek's ds_linear",
         Fix("use a ModelSlim W8A8 checkpoint (quant_model_description.json) instead of FP8")),
    _sig("hccl-socket-timeout", r"EI0006|Getting socket times out",
         "HCCL timed out connecting the ranks: a node did not start, or the nodes talk over the wrong interface",
         Fix("start every node within HCCL_CONNECT_TIMEOUT (default 120 s; raise it), set HCCL_IF_IP and "
             "GLOO_SOCKET_IFNAME/HCCL_SOCKET_IFNAME to the NIC of the cluster network; with Ray, "
             "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1")),
    _sig("graph-capture-streams", r"error code is 20700[58]|runtime result = 20700[58]",
         "graph capture ran out of NPU streams (it reads like 'check the remaining storage space'): too many "
         "captured sizes for this model's layers",
         Fix("capture fewer sizes: --compilation-config '{{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32]}}' "
             "(or --enforce-eager to confirm, never to measure speed)")),
    _sig("no-space", r"No space left on device",
         "a disk is full",
         Fix("free space where the log says, or move the workdir to a larger persistent disk (--workdir)")),
)

#: The resolver's own explanation of a conflict: a block, shown whole. A specific signature inside it (a +cpu
#: requirement, say) names the cause instead.
RESOLVER_BLOCKS: Sequence[Signature] = (
    _sig("pip-resolution-impossible", r"^ERROR: Cannot install |The conflict is caused by:|ResolutionImpossible",
         "pip found conflicting requirements", Fix("the conflicting requirements are listed above")),
    _sig("uv-no-solution", r"No solution found when resolving",
         "uv found no set of versions that meets every requirement", Fix("uv's explanation is shown above")),
)
