"""Our log lines in the flow-run logs of the Prefect UI.

Prefect sends only its own loggers' records to the API (and those PREFECT_LOGGING_EXTRA_LOGGERS names).
:func:`send_library_logs_to_prefect` gives the library's loggers Prefect's API handler, at INFO, from
the moment a flow module is imported, in every process that runs flows (the CLI's embedded runs, the
serve script, a work pool's worker). Records logged outside a flow or task run (a command checking its
input before Prefect starts) are not sent, instead of warning that no run is known.
"""

from __future__ import annotations

import logging

from prefect.context import get_run_context
from prefect.exceptions import MissingContextError
from prefect.logging.handlers import APILogHandler

LIBRARY_LOGGERS = ("datafarm", "tasks", "flows")


class RunLogHandler(APILogHandler):
    """Prefect's API handler, silent outside a run (the library also logs from commands and tests)."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "flow_run_id", None) is None:
            try:
                get_run_context()
            except MissingContextError:
                return
        super().emit(record)


def send_library_logs_to_prefect(level: int = logging.INFO) -> None:
    """Idempotent: a logger that already has an API handler (PREFECT_LOGGING_EXTRA_LOGGERS) gets no second."""
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if any(isinstance(handler, APILogHandler) for handler in logger.handlers):
            continue
        handler = RunLogHandler()
        handler.setLevel(level)
        logger.addHandler(handler)
        if logger.level == logging.NOTSET or logger.level > level:
            logger.setLevel(level)  # a worker's root logger passes only warnings
