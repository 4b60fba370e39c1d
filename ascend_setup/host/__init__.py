"""Facts about this machine: C library, CPUs, disks, interpreters, CANN, driver, NPUs."""
