"""The install pipeline: the ordered steps `install`, `resume`, `status` and `--dry-run` share."""

from __future__ import annotations

from typing import List

from ascend_setup.steps.base import Step
from ascend_setup.steps.preflight import Preflight


def build_pipeline() -> List[Step]:
    return [Preflight()]
