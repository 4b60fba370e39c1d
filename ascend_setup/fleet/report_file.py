"""`fleet report DIR`: the per-host results read, merged, and written as one JSON report next to them (or
where --out says)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.fleet.merged_report import HostAudit, fleet_json, read_fleet
from ascend_setup.utils.files import atomic_write_text, make_dir
from ascend_setup.utils.paths import check_output_file, check_path_length


def write_fleet_report(results: str, out: Optional[str]) -> Tuple[List[HostAudit], Dict[str, Any], Path]:
    """(the hosts, the merged report, where it was written): DIR's <host>.audit.json files, merged into
    DIR/report.json unless `out` names another file."""
    directory = Path(results).expanduser().absolute()
    check_path_length(directory, "DIR")
    hosts = read_fleet(directory)
    target = Path(out).expanduser().absolute() if out else directory / "report.json"
    check_output_file(target, "--out")
    data = fleet_json(hosts)
    make_dir(target.parent)  # as plan --lock does: check_output_file made sure it can be created
    atomic_write_text(target, json.dumps(data, indent=2) + "\n")
    return hosts, data, target
