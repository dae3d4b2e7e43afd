"""Keep a farm run going until it is delivered: restart it after crashes, kills and provider errors.

The run itself is resumable (finished phases are skipped, LLM sessions resume from their
transcripts), so the supervisor only has to start it again, with backoff, a bounded number of times.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SuperviseResult:
    delivered: bool
    runs: int
    last_returncode: int


def supervise(command: Sequence[str], delivered: Callable[[], bool], max_runs: int = 5,
              backoff_seconds: float = 5.0, backoff_max: float = 300.0, sleep=time.sleep,
              permanent_returncodes: Sequence[int] = ()) -> SuperviseResult:
    """Run `command` until `delivered()` holds, at most `max_runs` times, waiting longer each time."""
    returncode, delay = 0, backoff_seconds
    for run in range(1, max_runs + 1):
        returncode = subprocess.run(list(command)).returncode
        if delivered():
            return SuperviseResult(True, run, returncode)
        if returncode in permanent_returncodes:
            log.error("run %d ended with %d, which a restart cannot fix", run, returncode)
            return SuperviseResult(False, run, returncode)
        if run < max_runs:
            log.warning("run %d ended with %d before delivery; restarting in %.0f s", run, returncode, delay)
            sleep(delay)
            delay = min(delay * 2, backoff_max)
    return SuperviseResult(False, max_runs, returncode)
