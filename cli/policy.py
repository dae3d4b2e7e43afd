"""Policy commands: train (lerobot's training on a workspace's delivery). eval and report live beside it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

console = Console()


def train(
    workspace: Path = typer.Argument(..., help="A farmed workspace (its dataset/ and manifest.json)."),
    policy: str = typer.Option("act", "--policy", help="act, diffusion or pi05 (pi05 needs the `pi` extra)."),
    preset: str = typer.Option("cpu", "--preset", help="smoke (seconds), cpu (reduced, 2 cores) or gpu (lerobot's defaults)."),
    steps: int | None = typer.Option(None, "--steps", help="Train up to this step (default: the preset's); more "
                                                              "than done continues the same run."),
    threads: int | None = typer.Option(None, "--threads", help="torch threads (default: the preset's); 1 on a "
                                                                "CPU busy with other work."),
    use_flow: bool = typer.Option(False, "--flow", help="Run as the Prefect flow `train` (task state, artifacts)."),
) -> None:
    """Train a policy on WS's delivery into WS/policies/<policy>-<preset>/ (killed runs resume)."""
    if use_flow:
        from flows.train import train_flow

        result = train_flow(str(workspace), policy, preset, steps, threads)
    else:
        from datafarm.policy.train import train_policy

        result = train_policy(workspace, policy, preset, steps=steps, torch_threads=threads)
    timing = result.timing
    speed = f"{timing.seconds_per_step:.2f} s/step, {timing.loading_share:.0%} of it loading data" if timing else ""
    console.print(f"[bold]{result.folder}[/bold]: {result.steps_done} steps, final loss {result.final_loss}; {speed}; "
                  f"this run {result.wall_seconds:.0f} s wall, {result.cpu_seconds:.0f} CPU-s; "
                  f"loss curve {result.loss_curve}")


def register(app: typer.Typer) -> None:
    app.command()(train)
