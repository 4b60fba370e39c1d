"""ascend-setup: take an Ascend host to a working vLLM-Ascend environment, resumably."""

import time

__version__ = "0.1.0"
#: When this process began its work (the package is imported first): a command's time budget counts from here.
STARTED = time.monotonic()
