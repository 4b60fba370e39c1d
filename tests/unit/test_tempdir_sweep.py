"""The sweep of abandoned temp roots meets other runs' roots in every state: one being made (no owner file, or
an empty one from a writer of another version), one alive, one whose run is gone."""

from __future__ import annotations

import os
from pathlib import Path

from ascend_setup.utils import tempdirs


def test_a_root_in_any_state_is_swept_or_kept_without_a_crash(tmp_path: Path) -> None:
    states = {"no-owner": None, "empty-owner": "", "partial-owner": "   \n", "alive": None, "gone": "999999999 1\n"}
    for name, owner in states.items():
        root = tmp_path / f"{tempdirs.PREFIX}{name}"
        root.mkdir()
        if name == "alive":
            owner = f"{tempdirs._process_identity(os.getpid())}\n"
        if owner is not None:
            (root / tempdirs.OWNER).write_text(owner)
    tempdirs._sweep_abandoned(str(tmp_path))
    left = sorted(p.name[len(tempdirs.PREFIX):] for p in tmp_path.iterdir())
    assert left == ["alive", "empty-owner", "no-owner", "partial-owner"]  # only the gone run's root is removed
