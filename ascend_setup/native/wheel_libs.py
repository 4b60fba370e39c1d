"""The glibc a wheel's libraries really need, read from its members' ELF, against what its tags claim.

A `manylinux_2_28` tag says the wheel runs on glibc 2.28 and newer; the loader checks the versions its libraries
require (`GLIBC_2.34` in `.gnu.version_r`), and tags can understate them (vllm-project/vllm#41103: a wheel tagged
`manylinux_2_31` needing `GLIBC_2.34`). Each member is read through zipfile's stream: decompressed as far as the
ELF's section table, never written out or held whole.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ascend_setup.native.elf import DamagedElf, read_stream
from ascend_setup.native.venv_libs import is_shared_object_name

Glibc = Tuple[int, int]
_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_")
#: The legacy manylinux tags and the glibc each stands for (PEP 600).
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_GLIBC_VERSION = re.compile(r"^GLIBC_(\d+)\.(\d+)")


def tag_glibc(filename: str) -> Optional[Glibc]:
    """The oldest glibc the wheel's platform tags say it runs on; None for a pure or plain `linux_*` wheel."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return None
    claims = []
    for tag in tags:
        match = _MANYLINUX.match(tag.platform)
        if match:
            claims.append((int(match.group(1)), int(match.group(2))))
        else:
            claims += [v for k, v in _LEGACY.items() if tag.platform.startswith(k + "_")]
    return min(claims) if claims else None


@dataclass
class WheelGlibc:
    """What a wheel's libraries need of the C library, and what its tags claim."""

    wheel: str
    claimed: Optional[Glibc]
    needed: Optional[Glibc] = None
    member: Optional[str] = None  # the member that needs the newest
    damaged: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def understated(self) -> bool:
        return self.needed is not None and self.claimed is not None and self.needed > self.claimed


def wheel_glibc(path: Path) -> WheelGlibc:
    """Every shared object among the wheel's members, read for its GLIBC_x.y requirements."""
    found = WheelGlibc(wheel=path.name, claimed=tag_glibc(path.name))
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.is_dir() or not is_shared_object_name(info.filename):
                continue
            try:
                with archive.open(info) as member:
                    needs = read_stream(member, info.file_size, Path(info.filename))
            except DamagedElf as exc:
                found.damaged.append((info.filename, str(exc)))
                continue
            for versions in needs.version_needs.values():
                for version in versions:
                    match = _GLIBC_VERSION.match(version)
                    level = (int(match.group(1)), int(match.group(2))) if match else None
                    if level is not None and (found.needed is None or level > found.needed):
                        found.needed, found.member = level, info.filename
    return found


def _text(level: Glibc) -> str:
    return "%d.%d" % level


def glibc_lines(wheels: List[Path], target_glibc: str) -> List[str]:
    """One line per wheel whose libraries need a newer glibc than its tags claim, or than the target has."""
    target = tuple(int(p) for p in target_glibc.split(".")[:2])
    lines = []
    for path in wheels:
        try:
            found = wheel_glibc(path)
        except (zipfile.BadZipFile, OSError) as exc:
            lines.append(f"{path.name}: its libraries could not be read ({exc})")
            continue
        if found.needed is None or not (found.understated or found.needed > target):
            continue
        claim = f"tagged for glibc {_text(found.claimed)}" if found.claimed else "tagged for no glibc"
        verdict = (
            f"the target's glibc {target_glibc} cannot load it: build that package from source for it"
            if found.needed > target
            else f"the target's glibc {target_glibc} has it"
        )
        lines.append(
            f"{found.wheel}: {claim}, but {found.member} needs GLIBC_{_text(found.needed)} (read from its "
            f"ELF); {verdict}"
        )
    return lines
