"""Prefect flow `request`: a new task request over the API, checked, prepared, farmed and delivered.

Every parameter is checked before any work (a refusal fails the run with one message naming the
parameter and the fix); the workspace is new and named from the request under the farm root
(DATAFARM_FARM_ROOT), registered for the scheduled harvest, then farmed by the `farm` flow, which
ends with the delivery verified and the run's report artifact.
"""

from __future__ import annotations

from prefect import flow

import flows.run_logs  # noqa: F401  (a deployment loads this file as a script: register our log lines here too)
from flows.farm import farm_flow
from tasks.request_tasks import check_request_task, prepare_request_task


@flow(name="request")
def request_flow(request: str, episode: str, target_count: int = 10, renderer: str = "composite",
                 max_usd: float | None = None, phase_caps: dict[str, float] | None = None,
                 settings: dict | None = None) -> dict:
    """Farm a new request: `episode` is a calibration folder under an allowed root (or s3://bucket/prefix);
    `settings` other farm settings (expert_trial_seeds, seed_start, ...), checked like the rest."""
    plan = check_request_task({"request": request, "episode": episode, "target_count": target_count,
                               "renderer": renderer, "max_usd": max_usd, "phase_caps": phase_caps,
                               "settings": settings})
    workspace_path = prepare_request_task(plan)
    report = farm_flow(workspace_path)
    return {"workspace": workspace_path, "verified": bool(report and report.ok), "episodes": report.episodes,
            "problems": list(report.problems)}
