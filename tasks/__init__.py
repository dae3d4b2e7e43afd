"""Prefect tasks: thin wrappers of one library call each (retries only where I/O can fail)."""
