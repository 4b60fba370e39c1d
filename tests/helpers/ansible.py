"""Reading an Ansible play's outcome from its output."""

from __future__ import annotations

import re
import subprocess
from typing import Dict

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def recap(proc: subprocess.CompletedProcess) -> Dict[str, Dict[str, int]]:
    """host -> {ok, changed, unreachable, failed} from the PLAY RECAP."""
    return {
        m[0]: dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m[1:]))) for m in RECAP.findall(proc.stdout)
    }
