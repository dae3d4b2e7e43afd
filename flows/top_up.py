"""Prefect flow `top-up`: the scheduled harvest of every workspace registered under the farm root.

Each registered workspace is farmed to its target (or grown by `episodes_per_run`), unless another run
holds it or its budget is spent; one workspace's failure is recorded and the others go on. The run
publishes one table artifact: per workspace, what was done, episodes added, cost added, failure.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

import flows.run_logs  # noqa: F401  (a deployment loads this file as a script: register our log lines here too)
from datafarm.errors import DataFarmError
from datafarm.farm.top_up import set_target_count
from datafarm.workspace import Workspace
from datafarm.workspace.lock import farm_lock
from flows.farm import farm_flow, run_label
from tasks.request_tasks import figures_task, plan_top_up_task, publish_top_up_summary_task


@flow(name="top-up")
def top_up_flow(episodes_per_run: int | None = None) -> list[dict]:
    """Top up every registered workspace; `episodes_per_run` N also grows complete ones by N episodes."""
    rows = []
    for decision in plan_top_up_task(episodes_per_run):
        row = {"workspace": decision.name, "action": decision.action, "reason": decision.reason,
               "admitted_before": decision.admitted, "target": decision.target, "episodes_added": 0,
               "cost_added_usd": 0.0, "failure": ""}
        if decision.action == "farm":
            row.update(_farm_one(decision.workspace, decision.target))
        rows.append(row)
    publish_top_up_summary_task(rows)
    return rows


def _farm_one(workspace_path: str, target: int) -> dict:
    """Hold the workspace, raise its target if asked, farm it; what changed, or why it failed."""
    before = figures_task(workspace_path)
    failure = ""
    try:
        with farm_lock(Path(workspace_path), run_label()):
            set_target_count(Workspace.open(workspace_path), target)
            state = farm_flow(workspace_path, return_state=True)
    except DataFarmError as error:  # the lock was taken between the plan and now, or the target is bad
        return {"action": "skip", "failure": str(error)}
    if state.is_failed():
        failure = state.message or "failed"
    after = figures_task(workspace_path)
    return {"episodes_added": after.admitted - before.admitted,
            "cost_added_usd": round(after.total_usd - before.total_usd, 6), "failure": failure[:500]}
