"""A fake CANN installation on disk: both layouts, hostile set_env.sh, NNAL, driver, npu-smi.

Used by `ascend-setup demo`, the host tests and the end-to-end install tests. Nothing here is a mock object: the tool
reads these files and runs these scripts exactly as it would on a real Atlas host.
"""

from __future__ import annotations

import os
import platform
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Union

from ascend_setup.simulate.native_stubs import nnal_libatb

HOSTILE_BODY = """\
echo "Welcome to the CANN toolkit environment"
echo "[WARNING] some driver notice" >&2
set -e
export ASCEND_TOOLKIT_HOME={toolkit}
export ASCEND_HOME_PATH={toolkit}
export ASCEND_OPP_PATH={toolkit}/opp
export LD_LIBRARY_PATH={toolkit}/lib64:{toolkit}/lib64/plugin/opskernel:$LD_LIBRARY_PATH
export PYTHONPATH={toolkit}/python/site-packages:$PYTHONPATH
export PATH={toolkit}/bin:$PATH
false
export FAKE_CANN_AFTER_FAILURE=1
{tail}
"""

TAILS = {
    "hostile": "return 1",
    "exit": "exit 3",
    "nounset": "set -u\nexport FAKE_CANN_BROKEN=$FAKE_CANN_SURELY_UNSET_VARIABLE",
    "hang": "sleep 600",
}

NPU_SMI = """#!/usr/bin/env bash
missing() {{
  echo "npu-smi: error while loading shared libraries: libc_sec.so: cannot open shared object file: \
No such file or directory" >&2
  exit 127
}}
case ":$LD_LIBRARY_PATH:" in *":{driver}/lib64/common:"*) ;; *) missing;; esac
case ":$LD_LIBRARY_PATH:" in *":{driver}/lib64/driver:"*) ;; *) missing;; esac
# `info -t common -i N`: the AI Core clock as a 910B3 prints it (host/npu.py parse_common names the source); a
# line "NPU RATED_MHZ CURRENT_MHZ USAGE_PCT" in npu-clocks (a test writes it) sets a card's
if [ "$1 $2 $3" = "info -t common" ]; then
  rated=1800; current=1800; usage=0
  line=$(grep "^$5 " {driver}/npu-clocks 2>/dev/null | head -1)
  if [ -n "$line" ]; then read -r _ rated current usage <<< "$line"; fi
  printf '        %-31s: %s\n' "NPU ID" "$5" "Chip Count" 1
  echo
  printf '        %-31s: %s\n' "Chip ID" 0 "Memory Usage Rate(%)" 0 "HBM Usage Rate(%)" 5 \
    "Aicore Usage Rate(%)" "$usage" "Aicore Freq(MHZ)" "$rated" "Aicore curFreq(MHZ)" "$current" \
    "Aicore Count" 20 "Temperature(C)" 40 "NPU Real-time Power(W)" 93.6
  echo
  printf '        %-31s: %s\n' "Chip Name" mcu "Temperature(C)" 38
  exit 0
fi
if [ "$1 $2" = "info -t" ] && {{ [ "$6" = "-c" ] || [ -n "{board_names_chip}" ]; }}; then
cat <<'EOF2'
        NPU ID                         : 0
        Chip ID                        : 0
{chip_type_line}
        Chip Name                      : {chip}
        Chip Version                   : V1
        Board ID                       : 0x64
        PCB ID                         : NA
{npu_name_line}
EOF2
exit 0
fi
if [ "$1 $2" = "info -t" ]; then
cat <<'EOF2'
        NPU ID                         : 0
        Product Name                   : IT21PDDA01
        Board ID                       : 0x64
        PCB ID                         : NA
        Serial Number                  : 033VNY10M6000038
EOF2
exit 0
fi
cat <<'EOF2'
+------------------------------------------------------------------------------------------------+
| npu-smi 25.2.0                   Version: 25.2.0                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     {chip:<20}| OK            | 93.6        40                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3396 / 65536         |
+===========================+===============+====================================================+
| 1     {chip:<20}| OK            | 91.2        41                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          3396 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
EOF2
# the processes on the cards: one "NPU PID NAME MB" line each in npu-processes (a test writes it)
for npu in 0 1; do
  if grep -q "^$npu " {driver}/npu-processes 2>/dev/null; then
    grep "^$npu " {driver}/npu-processes | while read -r n pid name mb; do
      printf '| %-7s 0                 | %-13s | %-24s | %-23s |\n' "$n" "$pid" "$name" "$mb"
    done
  else
    printf '| No running processes found in NPU %-60s|\n' "$npu"
  fi
done
echo "+===========================+===============+====================================================+"
"""


#: What npu-smi prints per card, as upstream's get_chip_type reads it: an A2 board has a Chip Type, an A3
#: has none and an NPU Name instead, and an A5 names its chip in the board query without `-c 0`.
BOARDS: Dict[str, Dict[str, Union[str, bool]]] = {
    "A2": {"chip": "910B3"},
    "A3": {"chip": "Ascend910", "chip_type": "", "npu_name": "9391"},
    "310P": {"chip": "310P3"},
    "A5": {"chip": "Ascend950", "chip_type": "", "npu_name": "pr", "board_names_chip": True},
}

#: CANN's compiler driver, standing in for bisheng and the TBE operator compiler behind it (which is Python,
#: run by the interpreter the build hands it: HI_PYTHON, else `python3` from PATH). Every call is recorded,
#: with what `python3` and `cmake` resolve to, so a test can see the environment the compiler ran in.
BISHENG = """#!/usr/bin/env bash
{{ echo "=== bisheng $*"; echo "python3=$(command -v python3)"; echo "cmake=$(command -v cmake)"
  echo "HI_PYTHON=${{HI_PYTHON:-}}"; echo "HOME=$HOME"; echo "PATH=$PATH"; echo "PYTHONPATH=${{PYTHONPATH:-}}"
}} >> {record}
if [ "$1" = "--version" ]; then echo "bisheng version 9.1.0 (fake CANN)"; exit 0; fi
exec "${{HI_PYTHON:-python3}}" -c 'import decorator, attrs, sympy; print("operator compiled")'
"""

#: Sourced by csrc/build.sh before it looks for bisheng: records the environment the compiler would get.
SETENV_BASH = """{{ echo "=== setenv.bash"; echo "python3=$(command -v python3)"; echo "cmake=$(command -v cmake)"
  echo "HOME=$HOME"; echo "PATH=$PATH"; }} >> {record}
export PATH={toolkit}/bin:$PATH
"""


@dataclass
class FakeCann:
    root: Path
    toolkit: Path
    set_env: Path
    version: str
    driver: Optional[Path]

    @property
    def compiler_calls(self) -> Path:
        """What bisheng and setenv.bash recorded (one block per call)."""
        return self.root / "compiler-calls.log"


def _write(path: Path, text: str, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def build_fake_cann(
    root: Path,
    *,
    layout: str = "9.x",
    version: str = "9.1.0",
    chip: str = "910B3",
    arch: Optional[str] = None,
    set_env_mode: str = "hostile",
    nnal: bool = True,
    driver: bool = True,
    npu_name: str = "",
    install_info: bool = True,
    chip_type: str = "Ascend",
    board_names_chip: bool = False,
    board: Optional[str] = None,
    toolchain: bool = True,
    native_libatb: bool = False,
) -> FakeCann:
    """Lay out a CANN install under `root` (e.g. tmp/Ascend) the way the real installers do; `board`
    ('A3', ...) sets the chip fields its npu-smi prints (`BOARDS`); `toolchain` puts in the build's tools
    (bin/bisheng and bin/setenv.bash, which vllm-ascend's csrc/build.sh needs); `native_libatb`: NNAL's
    libatb.so is a real shared object exporting this release's runtime symbol (native_stubs.nnal_libatb, which
    needs a C compiler), else an empty file."""
    if board is not None:
        fields = {"chip_type": "Ascend", "npu_name": "", "board_names_chip": False, **BOARDS[board]}
        chip, chip_type, npu_name = str(fields["chip"]), str(fields["chip_type"]), str(fields["npu_name"])
        board_names_chip = bool(fields["board_names_chip"])
    arch = arch or platform.machine()
    root.mkdir(parents=True, exist_ok=True)
    if layout == "9.x":
        toolkit = root / f"cann-{version}"
        toolkit.mkdir(parents=True)
        os.symlink(toolkit.name, root / "cann")
        (root / "ascend-toolkit").mkdir()
        os.symlink(f"../{toolkit.name}", root / "ascend-toolkit" / "latest")
        set_env = toolkit / "set_env.sh"
    elif layout == "8.x":
        toolkit = root / "ascend-toolkit" / version
        toolkit.mkdir(parents=True)
        os.symlink(version, root / "ascend-toolkit" / "latest")
        set_env = root / "ascend-toolkit" / "set_env.sh"
        _write(toolkit / "version.cfg", f"toolkit_running_version=[7.5.0.1.129:{version}]\n")
    else:
        raise ValueError(layout)
    if install_info:
        _write(
            toolkit / f"{arch}-linux" / "ascend_toolkit_install.info",
            f"package_name=Ascend-cann-toolkit\nversion={version}\ninnerversion=V100R001C23\narch={arch}\n",
        )
    for sub in ("lib64", "bin", "python/site-packages", "opp/built-in/op_impl/ai_core/tbe/kernel/ascend910b"):
        (toolkit / sub).mkdir(parents=True, exist_ok=True)
    _write(set_env, HOSTILE_BODY.format(toolkit=toolkit, tail=TAILS[set_env_mode]))
    if toolchain:
        _write(toolkit / "bin" / "bisheng", BISHENG.format(record=root / "compiler-calls.log"), executable=True)
        _write(toolkit / "bin" / "setenv.bash", SETENV_BASH.format(record=root / "compiler-calls.log", toolkit=toolkit))
    if nnal:
        atb = root / "nnal" / "atb"
        libatb = atb / "latest" / "atb" / "cxx_abi_1" / "lib" / "libatb.so"
        libatb.parent.mkdir(parents=True, exist_ok=True)
        libatb.write_bytes((nnal_libatb(version) if native_libatb else None) or b"")
        _write(
            atb / "set_env.sh",
            f"export ATB_HOME_PATH={atb}/latest/atb/cxx_abi_1\n"
            f"export LD_LIBRARY_PATH={atb}/latest/atb/cxx_abi_1/lib:$LD_LIBRARY_PATH\n",
        )
    driver_dir = None
    if driver:
        driver_dir = root / "driver"
        _write(driver_dir / "version.info", "Version=25.2.0\nascendhal_version=7.35.23\npackage_version=25.2.0\n")
        for sub in ("lib64/common", "lib64/driver"):
            (driver_dir / sub).mkdir(parents=True, exist_ok=True)
        npu_line = f"        NPU Name                       : {npu_name}" if npu_name else ""
        type_line = f"        Chip Type                      : {chip_type}" if chip_type else ""
        _write(
            driver_dir / "tools" / "npu-smi",
            NPU_SMI.format(
                driver=driver_dir,
                chip=chip,
                npu_name_line=npu_line,
                chip_type_line=type_line,
                board_names_chip="yes" if board_names_chip else "",
            ),
            executable=True,
        )
    return FakeCann(root=root, toolkit=toolkit, set_env=set_env, version=version, driver=driver_dir)
