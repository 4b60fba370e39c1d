"""ascend-setup: take an Ascend host to a working vLLM-Ascend environment, resumably."""

import os
import time

__version__ = "0.1.0"


def _process_start() -> float:
    """time.monotonic() when this process began, by the kernel's start time: the interpreter's own start-up
    (0.1-0.3 s on a loaded host) is part of a command's wall time too. A process that imports the package
    long after it began (a test run, a program using the library) counts from the import."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # the command name, in parentheses, may hold spaces
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # starttime
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        return now
    return now - age if 0 <= age < 5 else now


#: When this process began its work: a command's time budget counts from here.
STARTED = _process_start()
