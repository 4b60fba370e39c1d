"""One build tree per build key (SOC, CANN, torch): incremental for the same key, fresh for another.

setup.py copies whatever `.so` it finds under `build/temp.*` into the wheel, and `build/lib` is packed as
it is: a tree built for one SOC leaks into the next wheel made from it. csrc's CMake state is worth
keeping (a rebuild takes minutes instead of 40), but only for the key it was made for.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ascend_setup.sourcebuild.source import EXTRACTED_MARK, extract_once

KEY_FILE = ".ascend-setup-build-key"


@dataclass(frozen=True)
class Tree:
    path: Path
    case: str  # what the log says: incremental, or why the tree is fresh


def build_key(*, soc: str, cann: str, torch: str) -> str:
    return f"soc={soc} cann={cann} torch={torch}"


def tree_for(sdist: Path, src_root: Path, key: str) -> Tree:
    """The extracted tree of `sdist`, kept when it was last built for `key`, else extracted again.

    Only a tree we extracted (it carries our mark) is ever removed."""
    base = sdist.name[: -len(".tar.gz")] if sdist.name.endswith(".tar.gz") else sdist.stem
    existing = src_root / base
    case = "fresh tree (first build)"
    if (existing / EXTRACTED_MARK).exists():
        recorded = (existing / KEY_FILE).read_text().strip() if (existing / KEY_FILE).exists() else ""
        if recorded == key:
            return Tree(extract_once(sdist, src_root), f"incremental (same build key: {key})")
        case = f"fresh tree (it was built for {recorded or 'an unknown key'}, this build is {key})"
        doomed = src_root / f".removing-{base}"
        if doomed.exists():
            shutil.rmtree(doomed)  # ours: a removal a killed run did not finish
        os.replace(existing, doomed)  # atomic: a kill now leaves no half-deleted tree under the real name
        shutil.rmtree(doomed)
    path = extract_once(sdist, src_root)
    (path / KEY_FILE).write_text(key + "\n")
    return Tree(path, case)
