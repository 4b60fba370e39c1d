"""NPU facts from npu-smi, run with the driver libraries it needs on LD_LIBRARY_PATH."""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

DRIVER_LIB_DIRS = ("lib64", "lib64/common", "lib64/driver")
_CHIP_ROW = re.compile(r"^\|\s*(\d+)\s+((?:Ascend)?\d{3}[A-Z]?\w*)\s+\|", re.MULTILINE)


@dataclass
class NpuFacts:
    npu_smi: Optional[str]
    chips: List[Dict[str, str]] = field(default_factory=list)
    soc_version: Optional[str] = None
    error: Optional[str] = None

    def to_json(self) -> dict:
        return asdict(self)


def npu_smi_env(driver_root: Optional[str], base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment npu-smi needs: the driver's lib dirs ahead of LD_LIBRARY_PATH (libc_sec.so)."""
    env = dict(os.environ if base is None else base)
    root = Path(driver_root or "/usr/local/Ascend/driver")
    dirs = [str(root / d) for d in DRIVER_LIB_DIRS]
    existing = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p and p not in dirs]
    env["LD_LIBRARY_PATH"] = ":".join(dirs + existing)
    return env


def find_npu_smi(driver_root: Optional[str]) -> Optional[str]:
    hit = shutil.which("npu-smi")
    if hit:
        return hit
    places = [Path(driver_root) / "tools" / "npu-smi"] if driver_root else []
    places += [Path("/usr/local/sbin/npu-smi"), Path("/usr/local/bin/npu-smi")]
    return next((str(p) for p in places if p.is_file() and os.access(p, os.X_OK)), None)


def parse_chips(info_text: str) -> List[Dict[str, str]]:
    """Rows of `npu-smi info`: NPU id and chip name (910B3, 310P3, ...)."""
    return [{"npu": m.group(1), "name": m.group(2)} for m in _CHIP_ROW.finditer(info_text)]


def parse_board(text: str) -> Dict[str, str]:
    """`npu-smi info -t board -i N -c 0` key : value lines."""
    result: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            result[key.strip()] = value.strip()
    return result


def soc_from_board(board: Dict[str, str]) -> Optional[str]:
    """SOC_VERSION the way vllm-ascend's setup.py derives it: Chip Type + Chip Name, lowercased
    ('Ascend' + '910B3' -> 'ascend910b3'); A3 boards add '_' + NPU Name ('ascend910_9391')."""
    chip_type = board.get("Chip Type", "").strip()
    chip_name = board.get("Chip Name", "").strip()
    if not chip_name:
        return None
    base = chip_name if chip_name.lower().startswith(chip_type.lower()) else chip_type + chip_name
    npu_name = board.get("NPU Name", "").strip()
    if npu_name:
        return f"{base}_{npu_name}".lower()
    return base.lower()


def npu_facts(driver_root: Optional[str], timeout: float = 20.0) -> NpuFacts:
    """Run npu-smi (info, then the board query for the first NPU); errors are facts, not exceptions."""
    exe = find_npu_smi(driver_root)
    if exe is None:
        return NpuFacts(npu_smi=None, error="npu-smi not found (no NPU driver on this machine)")
    env = npu_smi_env(driver_root)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=timeout)

    try:
        info = run("info")
        if info.returncode != 0:
            text = (info.stderr or info.stdout).strip()
            return NpuFacts(npu_smi=exe, error=text.splitlines()[-1] if text else f"npu-smi exited {info.returncode}")
        chips = parse_chips(info.stdout)
        soc = None
        if chips:
            board = run("info", "-t", "board", "-i", chips[0]["npu"], "-c", "0")
            soc = soc_from_board(parse_board(board.stdout)) if board.returncode == 0 else None
        return NpuFacts(npu_smi=exe, chips=chips, soc_version=soc)
    except (OSError, subprocess.SubprocessError) as exc:
        return NpuFacts(npu_smi=exe, error=f"npu-smi could not run: {exc}")


def missing_hwhiaiuser_group(uid: Optional[int] = None) -> bool:
    """True for a non-root user outside the HwHiAiUser group (the driver refuses them)."""
    uid = os.getuid() if uid is None else uid
    if uid == 0:
        return False
    try:
        group = grp.getgrnam("HwHiAiUser")
    except KeyError:
        return True
    user = pwd.getpwuid(uid)
    return group.gr_gid not in os.getgroups() and user.pw_name not in group.gr_mem and user.pw_gid != group.gr_gid
