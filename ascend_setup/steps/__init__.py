"""The install pipeline: the install session, its options, and one module per step (preflight to verify)."""
