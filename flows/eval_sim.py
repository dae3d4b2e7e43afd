"""Prefect flow `eval_sim`: closed-loop evaluation of a policy (and the controls) in simulation. Thin:
the seeds and trial files are the library's (datafarm.policy.evaluate); each batch of trials is a task.
"""

from __future__ import annotations

import os

from prefect import flow

import flows.run_logs  # noqa: F401  (a deployment loads this file as a script: register our log lines here too)
from datafarm.policy.evaluate import CONTROLS, EVAL_SEED_START, plan_run, split
from datafarm.workspace import Workspace
from tasks.eval_tasks import eval_batch_task, eval_report_task

BATCH_TRIALS = 5  # trials per task run: a task state per batch, not per trial


@flow(name="eval_sim")
def eval_sim_flow(workspace_path: str, policy: str, episodes: int = 50, appearance: str = "original",
                  workers: int = 1, seed_start: int = EVAL_SEED_START, controls: bool = False,
                  time_limit_s: float | None = None, videos: int = 2, n_action_steps: int | None = None,
                  temporal_ensemble: float | None = None) -> str:
    """Evaluate `policy` (a policy folder or a control) and, with `controls`, every control on the same seeds;
    returns the report's path. The policy only: `n_action_steps` actions run per prediction, or
    `temporal_ensemble` (ACT) a chunk predicted every step and the chunks averaged."""
    workspace = Workspace.open(workspace_path)
    policies = [policy] + ([c for c in CONTROLS if c != policy] if controls else [])
    for name in policies:
        run = plan_run(workspace, name, episodes, appearance, seed_start, videos, time_limit_s=time_limit_s,
                       n_action_steps=n_action_steps if name == policy else None,
                       temporal_ensemble=temporal_ensemble if name == policy else None)
        batches = [seeds[i:i + BATCH_TRIALS] for seeds in split(run.pending(), workers)
                   for i in range(0, len(seeds), BATCH_TRIALS)]
        threads = max(1, (os.cpu_count() or 1) // workers)
        for first in range(0, len(batches), workers):  # `workers` batches at a time, each in its own process
            futures = [eval_batch_task.submit(run, batch, threads) for batch in batches[first:first + workers]]
            for future in futures:
                future.result()
    return eval_report_task(workspace_path)
