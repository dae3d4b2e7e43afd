"""An API-triggered request on a local Prefect server: time to the first admitted episode, Prefect's overhead.

    python benchmarks/api_request.py [--target-count 1] [--expert-trial-seeds 2] [--output out/bench-api]

Starts a server, deploys prefect.yaml (deployments/deploy.py) and a process worker (deployments/local_stack.py),
triggers the `request` deployment with a synthetic apple-on-the-scale calibration, waits for the run and prints:
time from the trigger to the run starting, to the first admitted episode (its review.json), to the end;
the library's own wall time (the workspace's timings.jsonl) and Prefect's overhead: the run's wall time
spent outside the library calls, as a share of the run's wall time (goal below 5%).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target-count", type=int, default=1)
    parser.add_argument("--expert-trial-seeds", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None, help="folder for the stack (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from datafarm.calibration import synth_calibration
    from datafarm.farm.episodes import admitted_episodes, episode_dir
    from datafarm.workspace import Workspace
    from deployments.local_stack import LocalStack
    from flows.remote import run_status, submit_request

    base = (args.output or Path(tempfile.mkdtemp(prefix="datafarm-bench-api-"))).resolve()
    if base.exists() and args.output:
        shutil.rmtree(base)
    farm = {"DATAFARM_FARM_ROOT": str(base / "farm"), "DATAFARM_ALLOWED_ROOTS": str(base / "farm" / "calibrations")}
    calibration = synth_calibration(base / "farm" / "calibrations" / "apple", task="apple_on_scale", seconds=2.0)
    started = time.perf_counter()
    stack = LocalStack.start(base / "prefect", farm)
    try:
        up = time.perf_counter() - started
        deployed = stack.deploy()
        if deployed.returncode != 0:
            raise SystemExit(f"deploy failed:\n{deployed.stdout[-2000:]}\n{deployed.stderr[-2000:]}")
        ready = time.perf_counter() - started
        stack.start_worker("datafarm-cpu")
        with temporary_settings({PREFECT_API_URL: stack.url}):
            triggered = time.time()
            run = submit_request({"request": "Put the apple on the scale.", "episode": str(calibration),
                                  "target_count": args.target_count,
                                  "settings": {"expert_trial_seeds": args.expert_trial_seeds}})
            status = run_status(run.id)
            while not status.final and time.time() - triggered < args.timeout:
                time.sleep(2)
                status = run_status(run.id)
            with get_client(sync_client=True) as client:
                flow_run = client.read_flow_run(run.id)
    finally:
        stack.close()
    if status.state != "Completed":
        raise SystemExit(f"the request run ended {status.state}: {status.message}")
    [root] = (base / "farm" / "workspaces").iterdir()
    workspace = Workspace.open(root)
    first = admitted_episodes(workspace)[0]
    first_admitted = workspace.path(episode_dir(first), "review.json").stat().st_mtime - triggered
    run_start, run_end = flow_run.start_time.timestamp(), flow_run.end_time.timestamp()
    run_wall = run_end - run_start
    library = sum(row["seconds"] for row in workspace.timings())
    overhead = run_wall - library

    print(f"API-triggered request: apple_on_scale, target {args.target_count}, {os.cpu_count()} cores, local server\n")
    print(f"server up: {up:.1f} s; deployments built (pools + prefect deploy): {ready - up:.1f} s")
    print(f"trigger -> run started (worker pick-up, process start):  {run_start - triggered:8.1f} s")
    print(f"trigger -> first admitted episode (episode {first}):         {first_admitted:8.1f} s")
    print(f"trigger -> run finished (delivered, verified):           {run_end - triggered:8.1f} s")
    print(f"run wall time {run_wall:.1f} s; inside library calls {library:.1f} s (timings.jsonl)")
    print(f"Prefect overhead: {overhead:.1f} s = {overhead / run_wall:.1%} of the run's wall time "
          f"({(run_start - triggered + overhead) / (run_end - triggered):.1%} counting the pick-up)")
    print(f"\nworkspace: {root}")


if __name__ == "__main__":
    main()
