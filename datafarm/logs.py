"""Logging: a quiet console and a complete log file.

The console shows one line per *notable* event and every warning or error (one line each); the log
file (the workspace's ``logs/datafarm.log``) gets everything: our DEBUG, every library's INFO
(Prefect's "Finished in state Completed()", the ephemeral server, ...), warnings and tracebacks.

A record is notable when it is logged with ``extra=NOTABLE``::

    log.info("episode %d kept (seed %d)", index, seed, extra=NOTABLE)

Notable lines name the episode number and its final folder, never a temporary one. ``-v``
(``verbose=True``) shows every INFO record on the console and our DEBUG too.

FFmpeg's own output (libx264 banners and statistics, mp4 muxer lines) is silenced with PyAV's log
level. lerobot puts FFmpeg's default (printing) callback back at the end of each of its encodes, and
its per-camera encoder threads do so while other cameras' encoders are still closing (and printing
their statistics), so code that lets lerobot write video runs inside :func:`ffmpeg_kept_quiet`, which
makes that reset silence FFmpeg instead, and calls :func:`silence_ffmpeg` after. The ``datasets``
library's ``Map:`` progress bars are switched off with its own switch.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.text import Text

NOTABLE = {"notable": True}
OUR_LOGGERS = ("datafarm", "cli", "flows", "tasks")
# Loggers that may chat at INFO per request or per file: the log file gets only their warnings.
CHATTY_LOGGERS = ("httpx", "httpcore", "urllib3", "filelock", "aiosqlite", "asyncio", "PIL", "matplotlib",
                  "numba", "fsspec", "git")
# Their warnings and errors are about internals (FFmpeg on a damaged file, a library's deprecation):
# the file keeps them; the user sees our own message about the same event. Prefect's run loggers
# repeat a failure at every level (task, each flow): the command line reports it once, itself.
FILE_ONLY_WARNINGS = ("libav", "py.warnings", "prefect.task_runs", "prefect.flow_runs")

_console = Console(stderr=True, highlight=False, soft_wrap=True)


def console() -> Console:
    """The console log lines are printed on. Live displays (progress bars) must use this same console,
    so that lines print above the bars instead of through them."""
    return _console


class NotableOnly(logging.Filter):
    """Console filter: notable INFO records, and warnings/errors other than FILE_ONLY_WARNINGS' ones."""

    def __init__(self, verbose: bool):
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if self.verbose:
            return True
        if record.levelno >= logging.WARNING:
            return not record.name.startswith(FILE_ONLY_WARNINGS)
        return bool(getattr(record, "notable", False))


class ConsoleLineHandler(logging.Handler):
    """One line per record through rich: the message with its line breaks folded, a label for problems."""

    LABELS = {logging.WARNING: ("warning:", "yellow"), logging.ERROR: ("error:", "bold red"),
              logging.CRITICAL: ("error:", "bold red")}

    def __init__(self, target: Console):
        super().__init__(logging.DEBUG)
        self.target = target
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = " ".join(record.getMessage().split())
            if record.exc_info and record.exc_info[1] is not None:
                line += f" ({type(record.exc_info[1]).__name__}; the traceback is in the log file)"
            label, style = self.LABELS.get(record.levelno, ("", ""))
            if not label and record.levelno < logging.INFO:
                label, style = "debug:", "dim"
            parts = [(label, style), " "] if label else []
            self.target.print(Text.assemble(*parts, line))
        except Exception:  # a logging failure must never take the run down
            self.handleError(record)


class LogFileHandler(logging.FileHandler):
    """Everything, with time, level and logger name; created lazily on the first record."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(path, mode="a", encoding="utf-8", delay=True)
        self.setLevel(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))


def configure_logging(log_file: Path | None, verbose: bool = False) -> None:
    """Console: notable events, warnings and errors, one line each (all INFO with `verbose`). File:
    everything (our DEBUG, everyone's INFO). Call again to switch files; earlier handlers are replaced.

    Handlers are put on the root logger; Prefect, imported later, sees them and leaves the root alone
    (imported earlier, its console handler is removed here), so its per-task state lines reach the
    file and not the console."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        # Ours from an earlier call, Prefect's console, basicConfig's: replaced. pytest's capture stays.
        if isinstance(handler, (ConsoleLineHandler, LogFileHandler)) or type(handler) is logging.StreamHandler \
                or type(handler).__name__ == "PrefectConsoleHandler":
            root.removeHandler(handler)
            if isinstance(handler, LogFileHandler):
                handler.close()
    console_handler = ConsoleLineHandler(_console)
    console_handler.addFilter(NotableOnly(verbose))
    root.addHandler(console_handler)
    if log_file is not None:
        try:
            root.addHandler(LogFileHandler(Path(log_file)))
        except OSError as error:  # an unwritable workspace is reported by the command itself
            logging.getLogger(__name__).warning("cannot write the log file %s: %s", log_file, error)
    root.setLevel(logging.INFO)
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    logging.captureWarnings(True)
    silence_progress_bars()
    silence_ffmpeg()


def silence_progress_bars() -> None:
    """No `Map:`/download bars from Hugging Face's libraries (their switches, read at import; and the
    live switch when `datasets` is already imported)."""
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_warning()


def silence_ffmpeg() -> None:
    """FFmpeg's messages to PyAV's logger (errors only, file only) instead of the terminal. lerobot
    restores FFmpeg's printing callback after each encode, so call this again right after it."""
    import av.logging

    av.logging.set_level(av.logging.ERROR)


_quiet_lock = threading.Lock()
_quiet_depth = 0


@contextmanager
def ffmpeg_kept_quiet() -> Iterator[None]:
    """While inside, PyAV's `restore_default_callback` (which lerobot calls after each encode, from its
    encoder threads) silences FFmpeg instead of handing it the terminal. Restored on exit (nesting and
    threads are safe: the original comes back when the last one leaves)."""
    import av.logging

    global _quiet_depth
    with _quiet_lock:
        if _quiet_depth == 0:
            ffmpeg_kept_quiet.original = av.logging.restore_default_callback
            av.logging.restore_default_callback = silence_ffmpeg
        _quiet_depth += 1
    silence_ffmpeg()
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                av.logging.restore_default_callback = ffmpeg_kept_quiet.original
        silence_ffmpeg()
