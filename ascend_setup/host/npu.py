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
from typing import Any, Dict, List, Optional

from ascend_setup.host.cann import find_driver, primary_cann
from ascend_setup.matrix.soc import board_alias, device_of

DRIVER_LIB_DIRS = ("lib64", "lib64/common", "lib64/driver")
#: A chip row of `npu-smi info`: NPU id and name (910B3, 310P3, Ascend910, and suffixed ones: 910B4-1).
_CHIP_ROW = re.compile(r"^\|\s*(\d+)\s+((?:Ascend)?\d{3}[A-Z]?[\w-]*)\s+\|", re.MULTILINE)


@dataclass
class NpuFacts:
    npu_smi: Optional[str]
    chips: List[Dict[str, str]] = field(default_factory=list)
    soc_version: Optional[str] = None
    error: Optional[str] = None
    device_type: Optional[str] = None  # what a build for soc_version is made for (ascend_setup.matrix.soc)

    def to_json(self) -> Dict[str, Any]:
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
    """SOC_VERSION the way vllm-ascend's setup.py (get_chip_type) derives it from the board query:
    310P: Chip Type + Chip Name ('ascend310p3'); 910 with a Chip Type and no NPU Name (A2): 'ascend910b3';
    910 with an NPU Name (A3) and 950 (A5): Chip Name + '_' + NPU Name ('ascend910_9391'); an A2G3
    board: its alias ('ascend910b1')."""
    chip_type = board.get("Chip Type", "").strip()
    chip_name = board.get("Chip Name", "").strip()
    npu_name = board.get("NPU Name", "").strip()
    if not chip_name:
        return None
    if "310" in chip_name and chip_type:
        return (chip_type + chip_name).lower()
    if "910" in chip_name:
        if not npu_name:  # A2
            return (chip_type + chip_name).lower() if chip_type else None
        # A3 (upstream expects no Chip Type here; a board that prints one is read the same way)
        base = chip_name if not chip_type or chip_name.lower().startswith(chip_type.lower()) else chip_type + chip_name
        return f"{base}_{npu_name}".lower()
    if "950" in chip_name:
        return f"{chip_name}_{npu_name}".lower() if npu_name else None
    return board_alias(chip_name)


def npu_facts(driver_root: Optional[str], timeout: float = 20.0) -> NpuFacts:
    """Run npu-smi (info, then the board query for the first NPU); errors are facts, not exceptions."""
    exe = find_npu_smi(driver_root)
    if exe is None:
        return NpuFacts(npu_smi=None, error="npu-smi not found (no NPU driver on this machine)")
    env = npu_smi_env(driver_root)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=timeout)

    try:
        info = run("info")
        if info.returncode != 0:
            text = (info.stderr or info.stdout).strip()
            return NpuFacts(npu_smi=exe, error=text.splitlines()[-1] if text else f"npu-smi exited {info.returncode}")
        chips = parse_chips(info.stdout)
        soc = None
        if chips:
            # upstream's order: the board query alone names the chip on an A5; A2/A3/310P need `-c 0`
            board = run("info", "-t", "board", "-i", chips[0]["npu"])
            fields = parse_board(board.stdout) if board.returncode == 0 else {}
            if not fields.get("Chip Name"):
                board = run("info", "-t", "board", "-i", chips[0]["npu"], "-c", "0")
                fields = parse_board(board.stdout) if board.returncode == 0 else {}
            soc = soc_from_board(fields)
        return NpuFacts(npu_smi=exe, chips=chips, soc_version=soc, device_type=device_of(soc))
    except (OSError, subprocess.SubprocessError) as exc:
        return NpuFacts(npu_smi=exe, error=f"npu-smi could not run: {exc}")


#: The AI Core clock fields of `npu-smi info -t common -i N`, as Huawei's npu-smi reference ("Querying Common
#: Information", `npu-smi info -t common -i id`) names them: "Aicore Freq(MHZ)" is the AI Core frequency (the rated
#: one), "Aicore curFreq(MHZ)" the current AI Core frequency, "Aicore Usage Rate(%)" the AI Core usage. Its example
#: prints 1650 rated with 100 current on an idle card (the clock drops when idle); published 910B3 readings print
#: 1800 and 1800 under load, with "Aicore Count : 20". The block of the NPU chip comes first; an "mcu" block with its
#: own Temperature(C) may follow. `npu-smi info -t usages -i N` prints usage rates (HBM, Aicore ...) and no clock.
RATED_MHZ, CURRENT_MHZ, AICORE_USAGE = "Aicore Freq(MHZ)", "Aicore curFreq(MHZ)", "Aicore Usage Rate(%)"


@dataclass
class Clock:
    rated_mhz: Optional[float]
    current_mhz: Optional[float]
    usage_pct: Optional[float]


def parse_common(text: str) -> Clock:
    """`npu-smi info -t common -i N`: the NPU chip's AI Core clock (rated, current) and usage; None where absent."""
    fields: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:  # the first block is the NPU chip's
            fields[key.strip()] = value.strip()

    def number(name: str) -> Optional[float]:
        try:
            return float(fields[name])
        except (KeyError, ValueError):
            return None

    return Clock(number(RATED_MHZ), number(CURRENT_MHZ), number(AICORE_USAGE))


def card_clocks(driver_root: Optional[str], cards: List[int], timeout: float = 5.0) -> Dict[int, Clock]:
    """Each card's AI Core clock from `npu-smi info -t common -i N`; a card npu-smi cannot read is left out (no
    npu-smi: {})."""
    exe = find_npu_smi(driver_root)
    if exe is None:
        return {}
    found: Dict[int, Clock] = {}
    for card in cards:
        try:
            out = subprocess.run(
                [exe, "info", "-t", "common", "-i", str(card)],
                env=npu_smi_env(driver_root),
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0:
            found[card] = parse_common(out.stdout)
    return found


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


def host_npu(cann_home: Optional[str] = None) -> NpuFacts:
    """npu-smi's facts, with the driver next to the CANN a build would use (else the standard place)."""
    found = primary_cann(cann_home)
    driver = found.driver if found and found.driver else find_driver(Path(cann_home) if cann_home else None)
    return npu_facts(driver.root if driver else None)
