"""One resolution per target: the closure (uv pip compile for any platform), the lock file, its slices."""
