"""The vllm-ascend source build: environment, compile locks, progress, log triage."""
