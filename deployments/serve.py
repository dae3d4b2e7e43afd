"""Serve the farm flows as Prefect deployments (needs a Prefect server: PREFECT_API_URL).

    prefect server start --host 127.0.0.1 &           # or the compose file in docker/
    PREFECT_API_URL=http://127.0.0.1:4200/api python deployments/serve.py

Then trigger runs from the UI, with `prefect deployment run farm/farm --param workspace_path=WS`,
over the API: POST /api/deployments/{id}/create_flow_run {"parameters": {"workspace_path": WS}}, or a new
request with `datafarm submit --request-file R --episode CALIB`.
`DATAFARM_FARM_CRON` (e.g. "0 2 * * *") schedules nightly farm runs of `DATAFARM_WORKSPACE`;
`DATAFARM_TOP_UP_CRON` (default "0 2 * * *") the top-up of every registered workspace.
A remote PREFECT_API_URL needs PREFECT_API_AUTH_STRING (the server's auth string) in the environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prefect import serve  # noqa: E402
from prefect.settings import PREFECT_API_URL  # noqa: E402

from datafarm.api_auth import check_client_auth  # noqa: E402
from datafarm.errors import BadInput  # noqa: E402

from flows.eval_sim import eval_sim_flow  # noqa: E402
from flows.farm import episodes_flow, farm_flow, harvest_flow, push_flow, verify_flow  # noqa: E402
from flows.real_eval import real_eval_flow  # noqa: E402
from flows.request import request_flow  # noqa: E402
from flows.top_up import top_up_flow  # noqa: E402
from flows.train import train_flow  # noqa: E402


def deployments():
    workspace = os.environ.get("DATAFARM_WORKSPACE")
    cron = os.environ.get("DATAFARM_FARM_CRON")
    farm = farm_flow.to_deployment(
        name="farm", cron=cron if (cron and workspace) else None,
        parameters={"workspace_path": workspace} if workspace else None,
        description="Every phase of a workspace, resuming where it stopped.")
    # Re-rendering alone (say, on a GPU node): the episodes flow with phases=["render"].
    render = episodes_flow.to_deployment(name="render", parameters={"phases": ["render"]},
                                         description="Render the kept episodes that are not rendered yet.")
    others = [f.to_deployment(name=f.name) for f in (episodes_flow, harvest_flow, verify_flow)]
    # The delivery to S3 (`destination`, else the workspace's push_to): `prefect deployment run push/push ...`.
    push = push_flow.to_deployment(name="push", description="Push the verified delivery to S3 (only what changed).")
    # Closing the loop: train a policy on a delivery, then evaluate it closed-loop in simulation.
    train = train_flow.to_deployment(name="train", description="Train a policy (preset smoke|cpu|gpu) on a delivery.")
    evaluate = eval_sim_flow.to_deployment(name="eval_sim", description="Closed-loop evaluation with controls.")
    # On the host wired to the arms: the operator's go and verdicts are forms of the paused flow run.
    real = real_eval_flow.to_deployment(name="real_eval", description="Evaluate a policy on the dual PiPER.")
    # New requests over the API, and the nightly top-up of every workspace registered under the farm root.
    request = request_flow.to_deployment(name="request", description="Check, prepare, farm and deliver a new request.")
    top_up = top_up_flow.to_deployment(name="top-up", cron=os.environ.get("DATAFARM_TOP_UP_CRON", "0 2 * * *"),
                                       description="Top up every registered workspace (skips running or spent ones).")
    return [farm, render, *others, push, train, evaluate, real, request, top_up]


if __name__ == "__main__":
    try:
        check_client_auth(PREFECT_API_URL.value() or "http://127.0.0.1")
    except BadInput as error:
        sys.exit(f"error: {error}")
    serve(*deployments())
