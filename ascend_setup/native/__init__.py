"""Native truth: what the shared objects of a venv (or a wheel) need from the dynamic loader, and whether a target
gives it to them (NEEDED, RPATH/RUNPATH, symbol versions, undefined symbols), read from the ELF files themselves."""
