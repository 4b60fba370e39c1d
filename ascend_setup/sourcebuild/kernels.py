"""The compiled custom ops a vllm-ascend wheel must hold, as the published 0.23.0 wheels hold them.

With COMPILE_CUSTOM_KERNELS=0 (or a build that skipped them) setup.py still "succeeds", with a
py3-none-any wheel that has no `.so` at all; vLLM then dies at the first custom op. The published
cp311 x86_64 wheel holds `vllm_ascend/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so` (the torch
extension), `vllm_ascend/libvllm_ascend_kernels.so` (AscendC kernels; CMakeLists.txt skips it for 310P
and A5) and `vllm_ascend/_cann_ops_custom/vendors/custom_transformer/op_api/lib/libcust_opapi.so`
(the aclnn custom ops that build_aclnn.sh installs for every SOC family it knows).
"""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path
from typing import Iterable, List, Tuple

#: (what it is, a pattern of its path inside the wheel or site-packages, SOCs that do not build it)
REQUIRED: Tuple[Tuple[str, str, str], ...] = (
    ("the torch extension", "vllm_ascend/vllm_ascend_C*.so", ""),
    ("the AscendC kernels", "vllm_ascend/libvllm_ascend_kernels.so", r"ascend310p.*|ascend950.*"),
    ("the aclnn custom ops", "vllm_ascend/_cann_ops_custom/vendors/*/op_api/lib/libcust_opapi.so", ""),
)


def missing_kernels(names: Iterable[str], soc: str = "") -> List[str]:
    """What of REQUIRED is not among `names` (paths relative to site-packages or the wheel's root)."""
    have = list(names)
    missing = []
    for what, pattern, skipped_for in REQUIRED:
        if soc and skipped_for and re.fullmatch(skipped_for, soc):
            continue
        if not any(fnmatch(name, pattern) for name in have):
            missing.append(f"{what} ({pattern})")
    return missing


def installed_files(site_packages: Path, dist: str = "vllm_ascend") -> List[str]:
    """The paths a distribution's RECORD lists (what pip installed), empty when it is not installed."""
    names: List[str] = []
    for record in sorted(site_packages.glob(f"{dist}-*.dist-info/RECORD")):
        for line in record.read_text(errors="replace").splitlines():
            path = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line
            if path and (site_packages / path).is_file():
                names.append(path)
    return names
