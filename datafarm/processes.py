"""Child processes that end with the process that started them, however it ends.

A command killed with kill -9 (or a plain SIGTERM, which Python does not turn into an exception)
runs no cleanup; a training or evaluation child it started would go on writing into the workspace,
and the rerun would race it. Linux ends such children itself when asked at their start.
Where a stop should still be accounted for (a training run's cost), ``sigterm_raises`` turns SIGTERM into
an exception for the length of a block, so its cleanup runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """In a child process: have the kernel SIGKILL it when its parent exits (Linux; elsewhere nothing).

    Use as ``subprocess.Popen(preexec_fn=die_with_parent)`` or a process pool's ``initializer``.
    """
    if not sys.platform.startswith("linux"):
        return
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL)) != 0:
        log.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())


@contextlib.contextmanager
def sigterm_raises(error: Callable[[], BaseException]) -> Iterator[None]:
    """Inside the block, SIGTERM (`kill`, a scheduler's or a container's stop) raises ``error()`` like Ctrl-C
    raises KeyboardInterrupt, so `finally` clauses run. Only the main thread can take signals: elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise error()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
