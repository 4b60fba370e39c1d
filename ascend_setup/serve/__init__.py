"""Serving: compose the vllm serve command, validate it against the installed plugin, start, smoke, measure, stop."""
