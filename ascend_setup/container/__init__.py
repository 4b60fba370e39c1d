"""Containers: whether doctor runs in one and what it lacks, and the `docker run` this host needs."""
