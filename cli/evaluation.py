"""Evaluation commands: eval (closed-loop trials in simulation) and report (the success table, plots, videos)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

console = Console()


def eval_policy(
    workspace: Path = typer.Argument(..., help="A farmed workspace."),
    policy: str = typer.Option(..., "--policy", help="A trained policy folder (WS/policies/act-cpu) or a control: "
                                                    "do-nothing, blind-replay, expert."),
    episodes: int = typer.Option(50, "--episodes", help="Trials (evaluation seeds)."),
    appearance: str = typer.Option("original", "--appearance", help="original (the training distribution) or "
                                                                     "unseen (held-out tablecloth and coloured light)."),
    workers: int = typer.Option(1, "--workers", help="Processes running trials in parallel."),
    seed_start: int = typer.Option(None, "--seed-start", help="First evaluation seed (default 1,000,000); seeds "
                                                               "used for training are refused."),
    controls: bool = typer.Option(True, "--controls/--no-controls", help="Also run do-nothing, blind replay and "
                                                                          "the expert on the same seeds."),
    time_limit: float = typer.Option(None, "--time-limit", help="Cap each trial below the task's limit (s)."),
    n_action_steps: int = typer.Option(None, "--n-action-steps", help="Actions of each predicted chunk run before "
                                       "the policy looks again (default: the checkpoint's); the evaluation is "
                                       "named <policy>-replan<K>."),
    temporal_ensemble: float = typer.Option(None, "--temporal-ensemble", help="ACT: predict a chunk every step "
                                            "and act on the chunks' weighted mean for it, weights exp(-C * i), "
                                            "oldest first (ACT's paper: 0.01); named <policy>-ensemble<C>."),
) -> None:
    """Run the policy closed-loop on unseen seeds of WS's task; reruns skip finished trials."""
    from datafarm.policy.evaluate import EVAL_SEED_START
    from datafarm.workspace import Workspace
    from flows.eval_sim import eval_sim_flow

    Workspace.open(workspace)
    report = eval_sim_flow(str(workspace), policy, episodes, appearance, workers,
                           EVAL_SEED_START if seed_start is None else seed_start, controls, time_limit,
                           n_action_steps=n_action_steps, temporal_ensemble=temporal_ensemble)
    _print_table(workspace)
    console.print(f"report: [bold]{report}[/bold]")


def report(workspace: Path = typer.Argument(..., help="A workspace with evaluations (WS/evals/).")) -> None:
    """Write WS/reports/eval/ (report.md, report.json, plots, contact sheets) and print the success table."""
    from datafarm.policy.report import write_report
    from datafarm.workspace import Workspace

    path = write_report(Workspace.open(workspace))
    _print_table(workspace)
    console.print(f"report: [bold]{path}[/bold]")


def _print_table(workspace: Path) -> None:
    from datafarm.policy.report import cells
    from datafarm.workspace import Workspace

    table = Table(title=f"closed-loop success, {workspace}")
    for column in ("task", "policy", "appearance", "successes", "rate", "Wilson 95%"):
        # a narrow terminal folds a long name (act-cpu-ensemble0.01-5000steps) rather than cut its distinguishing tail
        table.add_column(column, overflow="fold")
    for cell in cells(Workspace.open(workspace)):
        table.add_row(cell.task, cell.policy, cell.appearance, f"{cell.successes}/{cell.trials}", f"{cell.rate:.0%}",
                      f"[{cell.low:.0%}, {cell.high:.0%}]")
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command(name="eval")(eval_policy)
    app.command()(report)
