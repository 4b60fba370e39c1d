"""`doctor`'s run: the host's checks (host/doctor_checks.py), the container's, and the install target."""
