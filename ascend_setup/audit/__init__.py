"""Read-only checks of an existing venv against a matrix row, and the fix plan."""
