"""eval-real: evaluate a policy on the dual PiPER (or its simulation) with placement cards and operator verdicts.

The terminal operator lives here (never in the library): it shows the placement card's path, waits for
Enter, lets the operator end a trial early with Enter (stdin polled, never blocking the loop), and asks the verdict and notes.
"""

from __future__ import annotations

import select
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.prompt import Confirm, Prompt

if TYPE_CHECKING:
    from datafarm.piper.real_eval import TrialInfo

console = Console()


class TerminalOperator:
    """Go, early stop and verdict at the terminal (rich prompts)."""

    def go(self, card_path: Path, trial: TrialInfo) -> None:
        console.rule(f"trial {trial.index + 1}, seed {trial.seed} ({trial.policy})")
        console.print(f"placement card: [bold]{card_path}[/bold] (open it; put each object on its ring)")
        Prompt.ask("clear the area, then press Enter to start", default="", show_default=False, console=console)
        console.print(f"running for up to {trial.time_limit_s:.0f} s; press Enter to end the trial early")

    def should_stop(self, trial: TrialInfo, step: int) -> bool:
        """Enter pressed since the go (polled without blocking: the control loop must keep its rate)."""
        ready, _, _ = select.select([sys.stdin], [], [], 0)
        if ready:
            sys.stdin.readline()
        return bool(ready)

    def verdict(self, trial: TrialInfo) -> tuple[bool, str]:
        console.print(f"trial {trial.index + 1} ended: {trial.end} after {trial.steps} steps")
        success = Confirm.ask("did the policy do the task?", console=console)
        notes = Prompt.ask("notes", default="", console=console)
        return success, notes


def eval_real(
    workspace: Path = typer.Argument(..., help="The workspace the policy was trained from (its task, its cards)."),
    policy: str = typer.Option(..., "--policy", help="A trained policy folder (WS/policies/act-cpu) or a control: "
                                                    "do-nothing, blind-replay."),
    episodes: int = typer.Option(10, "--episodes", help="Trials (evaluation seeds, never training seeds)."),
    station: str = typer.Option("real", "--station", help="real: the arms; simulated: the seed's scene on the "
                                "simulated rig; hil: the real driver (piper_sdk, virtual CAN) on fake firmwares "
                                "stepping that scene. In both rehearsals the task's judge gives the verdicts."),
    left_can: str = typer.Option("can0", "--left-can", help="CAN interface of the LEFT arm."),
    right_can: str = typer.Option("can1", "--right-can", help="CAN interface of the RIGHT arm."),
    cameras: Path = typer.Option(None, "--cameras", help="cameras.yaml (configs/cameras.example.yaml); real arms."),
    time_limit: float = typer.Option(60.0, "--time-limit", help="Longest trial (s)."),
    seed_start: int = typer.Option(None, "--seed-start", help="First evaluation seed (default 1,000,000)."),
    operator: str = typer.Option(None, "--operator", help="Who places, starts and judges: person (you, at this "
                                 "terminal; the default on the arms) or judge (the task's hidden judge; the default "
                                 "in rehearsals). `--station simulated --operator person` rehearses your part."),
) -> None:
    """Evaluate POLICY on the arms: a placement card per trial, your go, the policy, your verdict; reruns resume."""
    from datafarm.workspace import Workspace
    from flows.real_eval import operator_kind, real_eval_flow

    Workspace.open(workspace)
    person = operator_kind(operator, station) == "person"
    summary = real_eval_flow(str(workspace), policy, episodes, station, left_can, right_can,
                             str(cameras) if cameras else None, time_limit, seed_start,
                             TerminalOperator() if person else operator)
    console.print(f"success {summary['successes']}/{summary['trials']} ({summary['rate']:.0%}), Wilson 95% "
                  f"[{summary['wilson_low']:.0%}, {summary['wilson_high']:.0%}]; trials in "
                  f"[bold]{workspace / 'evals-real' / summary['policy']}[/bold]")


def register(app: typer.Typer) -> None:
    app.command(name="eval-real")(eval_real)
