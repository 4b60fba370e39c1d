"""The resumable engine: steps with declared inputs and typed outputs, a runner that decides per step from the
recorded state and the real world, an atomic state file and a one-run-at-a-time lock. It knows nothing of
what the steps install (the install pipeline is in `steps/`)."""
