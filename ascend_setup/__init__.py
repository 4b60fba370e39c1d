"""ascend-setup: take an Ascend host to a working vLLM-Ascend environment, resumably."""

import os
import time

__version__ = "0.1.0"


def _process_start() -> float:
    """time.monotonic() when this process began, by the kernel's start time: the interpreter's own start-up
    (0.1-0.3 s on a loaded host) is part of a command's wall time too. A process that imports the package
    long after it began (a test run, a program using the library) counts from the import."""
    from ascend_setup.utils.procstat import start_ticks

    now = time.monotonic()
    ticks = start_ticks()
    if ticks is None:  # not Linux
        return now
    try:
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, ValueError):
        return now
    return now - age if 0 <= age < 5 else now


#: When this process began its work: a command's time budget counts from here.
STARTED = _process_start()
