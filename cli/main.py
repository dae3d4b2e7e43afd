"""The `datafarm` command. Thin: each subcommand parses options and calls the library."""

from __future__ import annotations

import logging
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from datafarm.cli import farm, sim

app = typer.Typer(help="DataFarm: a coding agent in place of the teleoperator.", no_args_is_help=True)
app.add_typer(sim.app, name="sim")
farm.register(app)
console = Console()


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages.")) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "urllib3", "filelock", "libav"):  # their INFO lines bury ours
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)


@app.command()
def doctor(workspace: Path = typer.Option(Path.cwd(), help="Folder that must be writable.")) -> None:
    """Check the prerequisites (Python, Vulkan for SAPIEN, ffmpeg, bwrap, packages, a writable folder)."""
    from datafarm.doctor import run_checks

    checks = run_checks(workspace)
    table = Table(title="datafarm doctor")
    for column in ("check", "status", "detail", "fix"):
        table.add_column(column)
    for check in checks:
        status = "[green]ok[/green]" if check.ok else "[red]missing[/red]"
        table.add_row(check.name, status, check.detail, "" if check.ok else check.fix)
    console.print(table)
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
