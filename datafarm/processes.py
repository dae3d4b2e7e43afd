"""Child processes that end with the process that started them, however it ends.

A command killed with kill -9 (or a plain SIGTERM, which Python does not turn into an exception)
runs no cleanup; a training or evaluation child it started would go on writing into the workspace,
and the rerun would race it. Linux ends such children itself when asked at their start.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import sys

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
