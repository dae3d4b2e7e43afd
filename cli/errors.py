"""The command line's one error handler: every command runs inside `guarded`.

A library error (DataFarmError) prints one line, `error: <the problem and its fix>`, and exits with
its exit code; anything else is a bug: one line saying so and where the log file is, exit 70. The
full traceback always goes to the log file: the workspace's logs/datafarm.log when the command has a
workspace, else datafarm.log under the user's cache folder.
"""

from __future__ import annotations

import functools
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import click
import httpx
import typer
from rich.console import Console
from rich.text import Text

from datafarm.errors import EXIT_INTERNAL, DataFarmError, TransientError

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
WORKSPACE_LOG = "logs/datafarm.log"


def user_log_file() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "datafarm" / "datafarm.log"


def log_file_for(arguments: dict) -> Path:
    """The workspace's log when the command names an existing workspace, else the user's."""
    workspace = arguments.get("workspace")
    if workspace is not None and (Path(workspace) / "workspace.json").is_file():
        return Path(workspace) / WORKSPACE_LOG
    return user_log_file()


def find_cause(error: BaseException, kind: type | tuple[type, ...]) -> BaseException | None:
    """The first error of `kind` inside whatever wrapped it (Prefect re-raises, exception groups, `raise from`)."""
    seen, queue = set(), [error]
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return current
        queue += [e for e in (current.__cause__, current.__context__) if e is not None]
        queue += list(getattr(current, "exceptions", ()))
    return None


def library_error(error: BaseException) -> BaseException:
    """The library's error inside whatever wrapped it, else a lost Prefect API as a transient error, else `error`."""
    if (cause := find_cause(error, DataFarmError)) is not None:
        return cause
    if (lost := find_cause(error, httpx.TransportError)) is not None:
        # a Prefect server stopped or killed under a run is not a bug, and the workspace keeps what was done
        from prefect.settings import PREFECT_API_URL  # the env var or the active profile's, as Prefect reads it

        url = PREFECT_API_URL.value() or "the embedded Prefect server"
        return TransientError(f"lost the Prefect API at {url} ({type(lost).__name__}: {one_line(str(lost))[:120]}): "
                              "start the server again (or unset PREFECT_API_URL to use an embedded one) and rerun; "
                              "finished work is kept and resumed")
    return error


def one_line(text: str) -> str:
    return " ".join(text.split())


def write_traceback(log_file: Path, command: str, error: BaseException) -> Path:
    """Append the full traceback to the log file; fall back to the user's log if it cannot be written."""
    text = "".join(traceback.format_exception(error))
    for path in (log_file, user_log_file()):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} datafarm {command} failed:\n{text}\n")
            return path
        except OSError:
            continue
    return log_file


def report(error: BaseException, log_file: Path, command: str) -> int:
    """Print the one line for `error` and return the exit code."""
    cause = library_error(error)
    written = write_traceback(log_file, command, error)
    if isinstance(cause, DataFarmError):
        stderr.print(Text.assemble(("error:", "bold red"), " ", one_line(str(cause))))
        return cause.exit_code
    stderr.print(Text.assemble(("internal error:", "bold red"), f" {type(cause).__name__}: {one_line(str(cause))[:200]} "
                               f"(a bug in DataFarm; the traceback is in {written})"))
    return EXIT_INTERNAL


def guarded(command: Callable, setup: Callable[[Path], None] | None = None) -> Callable:
    """Run a command with the one error handler (and `setup(log_file)` first, e.g. the logging)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        log_file = log_file_for(kwargs)
        if setup is not None:
            setup(log_file)
        try:
            return command(*args, **kwargs)
        except (typer.Exit, click.exceptions.Exit, click.exceptions.Abort, click.exceptions.ClickException):
            raise  # typer's own: an exit status chosen on purpose, or a usage error click explains
        except Exception as error:
            raise typer.Exit(report(error, log_file, command.__name__.replace("_", "-"))) from None

    return run


def guard_all(app: typer.Typer, setup: Callable[[Path], None] | None = None) -> None:
    """Put every command of `app` and of its sub-apps inside `guarded` (call once, after registering)."""
    for info in app.registered_commands:
        info.callback = guarded(info.callback, setup)
    for group in app.registered_groups:
        guard_all(group.typer_instance, setup)
