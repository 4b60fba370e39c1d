"""ascend-setup: take an Ascend host to a working vLLM-Ascend environment, resumably."""

__version__ = "0.1.0"
