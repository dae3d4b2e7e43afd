"""Keep a farm run going until it is delivered: restart it after crashes, kills and transient errors.

The run itself is resumable (finished work is skipped, LLM sessions resume from their transcripts),
so the supervisor only has to start it again, with backoff, a bounded number of times. A run that
exits with a permanent error's code (bad input, refused, budget spent, unavailable, safety stop) is
never restarted: the same input would fail the same way.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from datafarm.errors import BadInput, BudgetSpent, DataFarmError, Refused, SafetyStop, Unavailable

log = logging.getLogger(__name__)

PERMANENT_EXIT_CODES = frozenset(error.exit_code for error in (BadInput, Refused, BudgetSpent, Unavailable, SafetyStop))


@dataclass(frozen=True)
class SuperviseResult:
    delivered: bool
    runs: int
    last_returncode: int

    @property
    def permanent(self) -> bool:
        return self.last_returncode in PERMANENT_EXIT_CODES


class NotDelivered(DataFarmError):
    """The supervised runs ended without a verified delivery; exits with the last run's code."""

    def __init__(self, result: SuperviseResult, log_file: Path):
        self.exit_code = result.last_returncode or 1
        self.permanent = result.permanent
        why = ("a permanent error, which a restart cannot fix: fix what its message says, then rerun"
               if result.permanent else "restarts did not help: read the log, then rerun")
        super().__init__(f"not delivered after {result.runs} run(s); the last exited with {result.last_returncode}, "
                         f"{why} (log: {log_file})")


def supervise(command: Sequence[str], delivered: Callable[[], bool], max_runs: int = 5,
              backoff_seconds: float = 5.0, backoff_max: float = 300.0, sleep=time.sleep,
              permanent_returncodes: Collection[int] = PERMANENT_EXIT_CODES) -> SuperviseResult:
    """Run `command` until `delivered()` holds, at most `max_runs` times, waiting longer each time."""
    returncode, delay = 0, backoff_seconds
    for run in range(1, max_runs + 1):
        returncode = subprocess.run(list(command)).returncode
        if delivered():
            return SuperviseResult(True, run, returncode)
        if returncode in permanent_returncodes:
            log.error("run %d ended with %d, a permanent error a restart cannot fix", run, returncode)
            return SuperviseResult(False, run, returncode)
        if run < max_runs:
            log.warning("run %d ended with %d before delivery; restarting in %.0f s", run, returncode, delay)
            sleep(delay)
            delay = min(delay * 2, backoff_max)
    return SuperviseResult(False, max_runs, returncode)
