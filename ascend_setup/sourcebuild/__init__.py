"""The vllm-ascend source build: environment, progress, log triage (its kernel_meta locks: kernel_meta.py)."""
