"""`datafarm sim ...`: the simulated rig on its own."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

app = typer.Typer(help="The simulated dual-arm PiPER rig.", no_args_is_help=True)
console = Console()


def parse_resolution(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise typer.BadParameter(f"{text!r}: write WIDTHxHEIGHT, e.g. 320x240 or 640x480") from None
    return width, height


@app.command()
def show(
    output: Path = typer.Option(Path("out/sim-show"), "--output", "-o", help="Folder for the episode and pictures."),
    resolution: str = typer.Option("320x240", help="Camera resolution, WIDTHxHEIGHT."),
) -> None:
    """Record a short scripted motion of both arms; write a contact sheet PNG and a preview mp4."""
    from datafarm.sim.show import show as run_show

    size = parse_resolution(resolution)
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console) as progress:
        task = progress.add_task("recording frames", total=None)
        result = run_show(output, size, progress=lambda done, total: progress.update(task, completed=done, total=total))
    console.print(f"recorded {result.frames} frames of 3 cameras into [bold]{result.episode}[/bold]")
    console.print(f"contact sheet: [bold]{result.contact_sheet}[/bold]")
    console.print(f"preview video: [bold]{result.preview}[/bold]")
