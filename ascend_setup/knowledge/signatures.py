"""Known failure signatures -> root cause -> fix. Shared by the build, audit, doctor and every step.

A 50,000-line build log hides its real cause under summaries ('FAILED:', 'Engine core
initialization failed', pip's 'subprocess-exited-with-error'). Triage reads the log in order and
returns the first line that names a cause, with the lines around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Pattern, Sequence


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: Pattern[str]
    cause: str
    fix: str


def _sig(id: str, pattern: str, cause: str, fix: str) -> Signature:
    return Signature(id, re.compile(pattern), cause, fix)


SIGNATURES: Sequence[Signature] = (
    _sig("compiler-module-missing", r"ModuleNotFoundError: No module named '([\w.]+)'",
         "a Python module is missing in the interpreter that runs CANN's operator compiler: '{0}'",
         "install the CANN Python dependencies into the venv (ascend-setup's cann-python-deps step), "
         "e.g. pip install {0}"),
    _sig("compile-lock", r"Another process is using this dir",
         "a stale kernel_meta.lock left by a killed build: the compiler compares pids, never liveness",
         "rerun ascend-setup (it removes locks whose process is gone), or delete that kernel_meta.lock by hand"),
    _sig("torch-version", r"Expected PyTorch version ([\d.]+)",
         "the venv's torch is not {0}: something displaced it (vllm's CUDA metadata does)",
         "pip install --no-deps torch=={0}, then rerun"),
    _sig("triton-ascend-index", r"No matching distribution found for triton-ascend",
         "triton-ascend at the row's version is only on the Ascend index, and a build-isolated sdist "
         "build cannot see it",
         "add the Ascend index (--extra-index-url) and build with --no-build-isolation (ascend-setup does both)"),
    _sig("glibc-too-old", r"GLIBC_(2\.\d+)' not found",
         "a binary was built for glibc {0}, newer than this machine's",
         "use wheels built for this glibc (see 'ascend-setup plan'), or build that package from source"),
    _sig("triton-shadowed", r"'function' object is not subscriptable",
         "upstream triton shadows triton-ascend: triton.jit returns a plain function",
         "pip uninstall -y triton, then reinstall triton-ascend last (--force-reinstall --no-deps)"),
    _sig("qkv-rmsnorm-rope", r"qkv_rmsnorm_rope",
         "torch.ops.vllm.qkv_rmsnorm_rope is missing from vllm-ascend 0.23.0's binaries on A2",
         "serve with --additional-config '{{\"ascend_fusion_config\": {{\"fuse_qknorm_rope\": false}}}}'"),
    _sig("libc-sec", r"libc_sec\.so: cannot open shared object file",
         "the NPU driver's libraries are not on LD_LIBRARY_PATH",
         "add /usr/local/Ascend/driver/lib64/common and lib64/driver to LD_LIBRARY_PATH"),
    _sig("libatb", r"libatb\.so: cannot open shared object file",
         "NNAL (ATB) is not installed or its set_env.sh was not sourced",
         "install Ascend-cann-nnal and source /usr/local/Ascend/nnal/atb/set_env.sh"),
    _sig("fp8-ds-linear", r"has no attribute 'o_groups'",
         "vllm-ascend 0.23.0's FP8 path maps every linear layer to DeepSeek's ds_linear",
         "use a ModelSlim W8A8 checkpoint (quant_model_description.json) instead of FP8"),
    _sig("torch-cpu-local-version", r"(?:depends on|requires|Requires-Dist:?)\s+(torch[\w-]*)\s*==\s*([\w.]+)\+cpu",
         "{0} {1}+cpu is required (torch-npu's x86_64 wheels ask for the +cpu build), and only the PyTorch CPU "
         "index serves +cpu builds; a PyPI mirror's x86_64 torch is the CUDA build",
         "take the torch family from the PyTorch CPU index: the row does so on x86_64 (pass "
         "--index pytorch-cpu=URL for a mirror of it)"),
)

#: The resolver's own explanation of a conflict: a block, shown whole. Checked after the specific
#: signatures above, which may name the cause inside it (a +cpu requirement, say).
RESOLVER_BLOCKS: Sequence[Signature] = (
    _sig("pip-resolution-impossible", r"^ERROR: Cannot install |The conflict is caused by:|ResolutionImpossible",
         "pip found conflicting requirements", "the conflicting requirements are listed above"),
    _sig("uv-no-solution", r"No solution found when resolving",
         "uv found no set of versions that meets every requirement", "uv's explanation is shown above"),
)
_BLOCK_END = re.compile(r"^To fix this you could try|^\s*hint:|^ERROR: ResolutionImpossible")

#: Lines that summarise a failure without naming its cause.
NOISE = re.compile(r"Engine core initialization failed|^FAILED: |ninja: build stopped|subprocess-exited-with-error|"
                   r"This error originates from a subprocess|Failed building wheel|Failed to build|"
                   r"CalledProcessError|returned non-zero exit status|^ERROR: Could not build wheels")
GENERIC = re.compile(r"\b\w*Error\b|\berror:|^ERROR:|\bfatal error\b|\bFATAL\b")
_COMBINED = re.compile("|".join(f"(?:{s.pattern.pattern})" for s in SIGNATURES))


@dataclass
class Diagnosis:
    id: str
    cause: str
    fix: Optional[str]
    line_number: int
    line: str
    context: List[str] = field(default_factory=list)

    def render(self) -> str:
        around = "\n".join(f"    {line}" for line in self.context)
        fix = f"\n  fix: {self.fix}" if self.fix else ""
        return f"root cause (log line {self.line_number}): {self.cause}{fix}\n{around}"


def _context(lines: Sequence[str], index: int, radius: int = 3) -> List[str]:
    return [line.rstrip("\n") for line in lines[max(0, index - radius):index + radius + 1]]


def _block(lines: Sequence[str], index: int, limit: int = 20) -> List[str]:
    """A resolver's explanation: from its first line to its 'to fix' advice (or `limit` lines)."""
    block = []
    for line in lines[index:index + limit]:
        if block and _BLOCK_END.search(line):
            break
        block.append(line.rstrip("\n"))
    return [l for l in block if l.strip()]


def _is_warning(line: str) -> bool:
    return line.lstrip().upper().startswith(("WARNING", "WARN:", "DEPRECATION"))


def triage(lines: Sequence[str]) -> Optional[Diagnosis]:
    """The first line naming a known cause; else the resolver's conflict block; else the first error line
    that is not a summary, and never a warning (pip's 'WARNING: Retrying ... NameResolutionError')
    while an error line exists."""
    for i, line in enumerate(lines):
        if _COMBINED.search(line):
            for sig in SIGNATURES:
                match = sig.pattern.search(line)
                if match:
                    groups = match.groups() or ("",)
                    return Diagnosis(sig.id, sig.cause.format(*groups), sig.fix.format(*groups), i + 1,
                                     line.rstrip("\n"), _context(lines, i))
    for i, line in enumerate(lines):
        for sig in RESOLVER_BLOCKS:
            if sig.pattern.search(line):
                start = next((j for j in range(i, min(i + 4, len(lines))) if "conflict is caused by" in lines[j]), i)
                block = _block(lines, i) if start == i else [lines[i].rstrip("\n"), *_block(lines, start)]
                return Diagnosis(sig.id, sig.cause, sig.fix, i + 1, line.rstrip("\n"), block)
    candidates = [(i, line) for i, line in enumerate(lines) if GENERIC.search(line) and not NOISE.search(line)]
    errors = [(i, line) for i, line in candidates if not _is_warning(line)]
    for i, line in errors or candidates:
        return Diagnosis("unknown", line.strip(), None, i + 1, line.rstrip("\n"), _context(lines, i))
    return None
