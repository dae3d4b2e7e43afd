"""Commands against a Prefect server: submit a request, follow its run; register a workspace for the top-up."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markdown import Markdown

from datafarm.errors import BadInput

console = Console()


def submit(
    request_file: Path = typer.Option(..., "--request-file", help="The task request in plain words."),
    episode: str = typer.Option(..., "--episode", help="Calibration episode on the farm's machine (under an allowed "
                                                       "root), or s3://bucket/prefix."),
    target_count: int = typer.Option(10, "--target-count", help="Admitted episodes to deliver."),
    renderer: str = typer.Option("composite", help="composite (CPU) or wan-vace (GPU worker)."),
    max_usd: float = typer.Option(None, "--max-usd", help="The workspace's whole budget in USD (none: no budget)."),
    phase_cap: list[str] = typer.Option([], "--phase-cap", help="PHASE=USD cap of an LLM phase, e.g. expert=2.5 "
                                                                 "(repeatable)."),
    deployment: str = typer.Option("request/request", help="The deployment to trigger."),
) -> None:
    """Trigger the `request` deployment on the Prefect server (PREFECT_API_URL); print the run's UI link."""
    from cli.farm import _read
    from flows.remote import submit_request

    caps = {}
    for item in phase_cap:
        phase, _, value = item.partition("=")
        try:
            caps[phase.strip()] = float(value)
        except ValueError:
            raise BadInput(f"--phase-cap {item!r}: write it as PHASE=USD, e.g. expert=2.5") from None
    run = submit_request({"request": _read(request_file), "episode": episode, "target_count": target_count,
                          "renderer": renderer, "max_usd": max_usd, "phase_caps": caps or None}, deployment)
    console.print(f"submitted: flow run [bold]{run.name}[/bold] ({run.id})\n{run.url}\n"
                  f"follow it: datafarm status {run.id} [--wait]")


def status(
    run_id: str = typer.Argument(..., help="The flow run id `datafarm submit` printed."),
    wait: bool = typer.Option(False, "--wait", help="Poll until the run is final."),
    interval: float = typer.Option(5.0, help="Seconds between polls with --wait."),
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """The run's state; when it is done, the farm's summary. Exit 1 when the run failed or crashed."""
    from flows.remote import run_status

    current = run_status(run_id)
    while wait and not current.final:
        time.sleep(interval)
        current = run_status(run_id)
    if as_json:
        console.print_json(json.dumps(current.__dict__))
    else:
        console.print(f"{current.name} ({current.deployment or 'no deployment'}): [bold]{current.state}[/bold]"
                      f"{': ' + current.message if current.message else ''}\n{current.url}")
        for report in current.reports:
            console.print(Markdown(report))
    if current.final and current.state not in ("Completed",):
        raise typer.Exit(1)


def register(
    workspace: Path = typer.Argument(..., help="The workspace to top up on schedule."),
    max_usd: float = typer.Option(None, "--max-usd", help="Set its whole budget in USD (the workspace's max_usd); "
                                  "no work starts past it, and the top-up skips it."),
) -> None:
    """Register a workspace under the farm root (DATAFARM_FARM_ROOT) for the scheduled top-up."""
    from datafarm.farm.fleet import Registry, farm_root
    from datafarm.workspace import Workspace

    entry = Registry(farm_root()).register(Workspace.open(workspace), max_usd)
    console.print(f"registered [bold]{entry.name}[/bold] in {farm_root() / 'registry'}")


def register_commands(app: typer.Typer) -> None:
    for command in (submit, status, register):
        app.command()(command)
