"""bench: the sweep over concurrency against a running OpenAI-compatible server."""
