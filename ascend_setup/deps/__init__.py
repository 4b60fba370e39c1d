"""The requirement set the install asks for: vllm's minus CUDA-only, the plugin's pins winning."""
