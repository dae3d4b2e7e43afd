"""The `datafarm` command. Thin: each subcommand parses options and calls the library or a flow.

Every command runs inside the one error handler (`cli.errors.guarded`): a library error prints one
line and exits with its code (README, "Exit codes"); the traceback goes to the log file.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from cli import evaluation, farm, policy, real_eval, remote, render, robot, sim, storage
from cli.errors import guard_all

# The embedded Prefect server is given 20 s to start by default; a busy machine (the farm's own
# workers, say) needs more. Set before Prefect is imported (its settings are read then).
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

app = typer.Typer(help="DataFarm: a coding agent in place of the teleoperator.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
app.add_typer(sim.app, name="sim")
console = Console()
_options = {"verbose": False}


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages.")) -> None:
    _options["verbose"] = verbose


def setup_logging(log_file: Path) -> None:
    """The console quiet (notable events, one line each), everything in the command's log file."""
    from datafarm.logs import configure_logging

    configure_logging(log_file, _options["verbose"])


@app.command()
def doctor(workspace: Path = typer.Option(Path.cwd(), help="Folder that must be writable.")) -> None:
    """Check the prerequisites (Python, Vulkan for SAPIEN, ffmpeg, bwrap, packages, a writable folder)."""
    from datafarm.doctor import run_checks

    checks = run_checks(workspace)
    table = Table(title="datafarm doctor")
    for column in ("check", "status", "detail", "fix"):
        table.add_column(column)
    for check in checks:
        status = "[green]ok[/green]" if check.ok else "[yellow]optional[/yellow]" if check.optional else "[red]missing[/red]"
        table.add_row(check.name, status, check.detail, "" if check.ok else check.fix)
    console.print(table)
    if not all(check.ok or check.optional for check in checks):
        raise typer.Exit(1)


farm.register(app)
policy.register(app)
evaluation.register(app)
robot.register(app)
real_eval.register(app)
remote.register_commands(app)
render.register(app)
storage.register(app)
guard_all(app, setup_logging)

if __name__ == "__main__":
    app()
