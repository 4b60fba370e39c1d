"""Leaves that import nothing of the domain: files, inputs, processes, temp roots, signals, deadlines."""
