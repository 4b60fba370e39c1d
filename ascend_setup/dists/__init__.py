"""Distributions and venvs by the PEPs: versions, markers, RECORD checks, reading a venv, pip and uv."""
