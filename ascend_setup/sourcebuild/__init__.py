"""The vllm-ascend source build: environment, kernel_meta locks, progress, log triage."""
