"""A managed CPython for the venv when the host has none in the row's range: a pinned python-build-standalone
build, fetched by the tool (resumable, from the first mirror that has the exact file) and unpacked by uv."""
