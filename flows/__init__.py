"""Prefect flows. Importing any of them sends the library's log lines to the flow-run logs (run_logs)."""

from flows.run_logs import send_library_logs_to_prefect

send_library_logs_to_prefect()
