"""Shared by the storage tests: the small transfer settings and an interruption."""

from datafarm.storage import NoProgress

TEST_SETTINGS = {"multipart_threshold": "16KiB", "part_size": "8KiB", "workers": 2}


class Interrupt(Exception):
    """What stops a transfer in these tests: as if the user pressed Ctrl-C mid-upload."""


class StopAfter(NoProgress):
    """Transfer progress that interrupts once `limit` bytes went."""

    def __init__(self, limit: int):
        self.limit, self.sent = limit, 0

    def advance(self, nbytes: int) -> None:
        self.sent += nbytes
        if self.sent >= self.limit:
            raise Interrupt(f"interrupted after {self.sent} bytes")
