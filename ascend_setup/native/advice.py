"""The fix for a native problem: triage's, for the message the loader itself would print.

The same cause has one fix wherever it shows up: a `libatb.so: cannot open shared object file` read from a crash
log by `triage` and found beforehand by `audit` or `verify` get the same text (knowledge/signatures.py). What
triage knows no signature for gets the generic fix of its kind here.
"""

from __future__ import annotations

from typing import Optional

from ascend_setup.knowledge.fixes import Host
from ascend_setup.native.loader import Problem

_GENERIC = {
    "unresolved": "install what provides {needs}, or add the directory that holds it to LD_LIBRARY_PATH",
    "version": "the library that provides it is older than the one {library} was built against: install a newer "
    "one, or a build of the package made for this system",
    "damaged": "reinstall the package that ships {library}: the file is not a loadable library",
    "outside": "reinstall the package: its RECORD leads out of the venv, to a file the venv does not own",
    "abi": "reinstall the package with the wheel for this machine (pip install --force-reinstall --no-deps)",
}


def fix_for(problem: Problem, host: Optional[Host] = None) -> Optional[str]:
    """Triage's fix for the loader's message, else the generic one of the problem's kind (None for a loop,
    which the loader copes with)."""
    from ascend_setup.knowledge.scan import triage  # only when there is a problem: audit's start-up stays light

    diagnosis = triage([f"ImportError: {problem.loader_message}"], host=host)  # as Python reports a failed load
    if diagnosis is not None and diagnosis.fix:
        return diagnosis.fix
    generic = _GENERIC.get(problem.kind)
    return generic.format(needs=problem.needs, library=problem.library.name) if generic else None
