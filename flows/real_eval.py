"""Prefect flow `real_eval`: evaluate a policy on the real dual PiPER (or rehearse it: `station` simulated or hil).

    connect (task) -> preflight (task) -> for each pending trial: placement card, operator's go, the
    policy loop, the operator's verdict, the trial's dataset and file (library) -> summary artifact (task)

Trials run in the flow's body. `operator` says who places, starts and judges: ``person``, Prefect
pause-for-input (:class:`PrefectOperator`: the flow run pauses in the UI with a form; resume it with the
form filled), the default on the arms; ``judge``, the task's hidden judge
(:class:`datafarm.piper.real_eval.JudgeOperator`), the default in a rehearsal (simulated, hil), which a
person may also take to practise the forms. Any other :class:`~datafarm.piper.real_eval.Operator` (the
command line's terminal one) may be passed. A rerun resumes at the next trial; an emergency stop
ends the run (the summary is still published) and the flow fails with the SafetyStop.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput

import flows.run_logs  # noqa: F401  (a deployment loads this file as a script: register our log lines here too)
from datafarm.errors import BadInput
from datafarm.piper.real_eval import (
    DEFAULT_TIME_LIMIT_S,
    JudgeOperator,
    TrialInfo,
    load_eval_policy,
    plan_real_eval,
    run_real_trials,
)
from datafarm.workspace import Workspace
from tasks.real_eval_tasks import connect_station_task, preflight_task, summary_task

log = logging.getLogger(__name__)

OPERATOR_TIMEOUT_S = 3600  # how long a paused trial waits for the operator before the flow run fails
OPERATOR_POLL_S = 2  # how soon a resumed form is seen
OPERATORS = ("person", "judge")


class PlacedInput(RunInput):
    """The operator's go: the objects are placed as the card shows, the area is clear."""

    objects_placed: bool = True


class VerdictInput(RunInput):
    """The operator's verdict on the trial just run."""

    success: bool
    notes: str = ""


class PrefectOperator:
    """Go and verdict as Prefect pause-for-input forms in the UI (the flow run pauses at each)."""

    def __init__(self, timeout_s: int = OPERATOR_TIMEOUT_S, poll_s: int = OPERATOR_POLL_S):
        self.timeout_s, self.poll_s = timeout_s, poll_s

    def go(self, card_path: Path, trial: TrialInfo) -> None:
        description = (f"**Trial {trial.index + 1}, seed {trial.seed}** ({trial.policy}): place the objects as the "
                       f"card shows: [placement card]({Path(card_path).resolve().as_uri()}); clear the area, then "
                       f"resume. The policy then runs for up to {trial.time_limit_s:.0f} s.")
        placed = pause_flow_run(wait_for_input=PlacedInput.with_initial_data(description=description),
                                timeout=self.timeout_s, poll_interval=self.poll_s)
        if not placed.objects_placed:
            log.warning("trial %d: the operator resumed without confirming the placement", trial.index)

    def verdict(self, trial: TrialInfo) -> tuple[bool, str]:
        description = (f"**Trial {trial.index + 1}, seed {trial.seed}** ended ({trial.end}, {trial.steps} steps): "
                       "did the policy do the task? Add notes (what went wrong, anything unusual).")
        answer = pause_flow_run(wait_for_input=VerdictInput.with_initial_data(description=description, success=False),
                                timeout=self.timeout_s, poll_interval=self.poll_s)
        return answer.success, answer.notes


def operator_kind(operator: Any, station: str) -> str | None:
    """The named operator (None for an Operator object): the station's default, or a checked choice."""
    if not isinstance(operator, str | None):
        return None
    kind = operator or ("person" if station == "real" else "judge")
    if kind not in OPERATORS:
        raise BadInput(f"unknown operator {kind!r}; choose one of {', '.join(OPERATORS)}")
    if kind == "judge" and station == "real":
        raise BadInput("the judge needs a simulated scene to judge; on the arms the operator is a person "
                       "(leave --operator out, or rehearse with --station simulated)")
    return kind


@flow(name="real_eval")
def real_eval_flow(workspace_path: str, policy: str, episodes: int = 10, station: str = "real",
                   left_can: str = "can0", right_can: str = "can1", cameras_file: str | None = None,
                   time_limit_s: float = DEFAULT_TIME_LIMIT_S, seed_start: int | None = None,
                   operator: Any = None) -> dict:
    """Evaluate `policy` (a policy folder or a control) for `episodes` trials; returns the summary.
    `operator`: "person" (forms in the UI), "judge" (rehearsals only), an Operator, or None for the station's own."""
    workspace = Workspace.open(workspace_path)
    chosen = operator_kind(operator, station)
    run = plan_real_eval(workspace, policy, episodes, time_limit_s, station, seed_start)
    arms = connect_station_task(run, left_can, right_can, cameras_file)
    try:
        preflight_task(arms)
        if chosen == "person":
            operator = PrefectOperator()
        elif chosen == "judge":
            operator = JudgeOperator(arms)  # (None: the caller's own Operator)
        if run.pending():
            run_real_trials(run, arms, load_eval_policy(workspace, policy), operator)
    finally:
        arms.close()
        summary = summary_task(run)
    return summary
