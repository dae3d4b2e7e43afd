"""The library's one error model.

Every error the library raises on purpose derives from :class:`DataFarmError` and is either
*permanent* (a rerun with the same input fails the same way: bad input, a refused request, a spent
budget, a renderer that is not there, a safety stop) or *transient* (a provider's 5xx, a time-out,
an I/O failure: a retry may succeed). Prefect retries only transient errors; the command line prints
``str(error)`` (the problem and its fix, one line) and exits with ``error.exit_code``; ``supervise``
never restarts after a permanent one.

Exit codes (documented in the README):

====  ==========================================================
 0    success
 1    a check failed (verify found problems; doctor found something missing)
 2    bad input: a file, a setting, a request or a workspace is wrong (fix it, then rerun)
 3    the request was refused: the author cannot build it
 4    a budget was spent: raise the cap or lower the target
 5    a renderer, sandbox or other prerequisite is unavailable
 6    a safety stop
 75   a transient failure (provider, time-out, I/O, a lost Prefect API): rerun, or `datafarm supervise`
 70   an unexpected internal error (a bug: the log file has the traceback)
====  ==========================================================
"""

from __future__ import annotations

EXIT_CHECK_FAILED = 1
EXIT_INTERNAL = 70


class DataFarmError(Exception):
    """Base of every error the library raises on purpose. ``str(error)`` names the problem and the fix."""

    permanent: bool = True
    exit_code: int = 2


class PermanentError(DataFarmError):
    """Rerunning with the same input cannot help."""

    permanent = True


class TransientError(DataFarmError):
    """A retry may succeed (a provider's 5xx, a time-out, an I/O failure)."""

    permanent = False
    exit_code = 75


class BadInput(PermanentError):
    """A file, a setting, a request or a workspace is wrong."""

    exit_code = 2


class Refused(PermanentError):
    """The author cannot serve the request."""

    exit_code = 3


class BudgetSpent(PermanentError):
    """A phase would pass its USD cap."""

    exit_code = 4


class Unavailable(PermanentError):
    """A renderer, the sandbox or another prerequisite is not installed or not reachable."""

    exit_code = 5


class SafetyStop(PermanentError):
    """A safety layer stopped the robot."""

    exit_code = 6


def is_transient(error: BaseException) -> bool:
    """Whether a retry may help: our transient errors, time-outs and OS-level I/O failures."""
    if isinstance(error, DataFarmError):
        return not error.permanent
    return isinstance(error, (TimeoutError, ConnectionError, BrokenPipeError))


def exit_code_of(error: BaseException) -> int:
    return error.exit_code if isinstance(error, DataFarmError) else EXIT_INTERNAL
