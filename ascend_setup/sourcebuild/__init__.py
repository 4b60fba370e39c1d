"""The vllm-ascend source build: the tree per build key, third-party archives, MAX_JOBS, kernels, kernel_meta locks."""
