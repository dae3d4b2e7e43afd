"""Robot commands: record-calibration (the one calibration episode, on the dual PiPER or its simulation).

Errors are not handled here: a library error propagates to `cli.errors.guarded`, which prints it.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TimeRemainingColumn,
)

console = Console()


def record_calibration(
    output: Path = typer.Option(..., "--output", help="New folder for the calibration episode (a LeRobot dataset)."),
    cameras: Path = typer.Option(..., "--cameras", help="cameras.yaml: head, left_wrist, right_wrist "
                                 "(see configs/cameras.example.yaml)."),
    left_can: str = typer.Option("can0", "--left-can", help="CAN interface of the LEFT arm."),
    right_can: str = typer.Option("can1", "--right-can", help="CAN interface of the RIGHT arm."),
    seconds: float = typer.Option(10.0, "--seconds", help="How long to record."),
    simulated: bool = typer.Option(False, "--simulated", help="Record the simulated rig instead of the arms."),
    teach: bool = typer.Option(False, "--teach", help="Real arms: send them nothing (move them in teach mode); "
                               "default: enable them and hold the starting pose."),
) -> None:
    """Record the calibration episode `datafarm prepare` takes: preflight first, then head + both wrists + 14-D state."""
    from datafarm.calibration.record import CalibrationRecordingConfig
    from datafarm.calibration.record import record_calibration as run_record

    config = CalibrationRecordingConfig(cameras_file=cameras, left_can=left_can, right_can=right_can,
                                        seconds=seconds, simulated=simulated, teach=teach)
    console.print("preflight: opening the arms and cameras, checking them against " + str(cameras))
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console) as bar:
        tasks: dict[str, TaskID] = {}

        def advance(done: int, total: int) -> None:  # the bar appears once the preflight has passed
            if "recording" not in tasks:
                tasks["recording"] = bar.add_task("recording frames", total=total)
            bar.update(tasks["recording"], completed=done)

        result = run_record(output, config, progress=advance)
    arms = ", ".join(f"{side} {hz:.0f} Hz" for side, hz in result.preflight.arms.items() if hz is not None)
    console.print(f"preflight: cameras {result.preflight.cameras}" + (f"; arms' feedback {arms}" if arms else ""))
    console.print(f"calibration episode: [bold]{result.root}[/bold] ({result.frames} frames at {result.fps} fps); "
                  f"next: datafarm prepare --episode {result.root} --request-file REQUEST --output WS")


def register(app: typer.Typer) -> None:
    app.command(name="record-calibration")(record_calibration)
