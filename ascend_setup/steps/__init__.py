"""The resumable engine (state, lock, runner) and one module per pipeline step."""
