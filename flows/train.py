"""Prefect flow `train`: train one policy on a workspace's delivery (thin: one task)."""

from __future__ import annotations

from prefect import flow

import flows.run_logs  # noqa: F401  (a deployment loads this file as a script: register our log lines here too)
from datafarm.policy.train import TrainResult
from tasks.policy_tasks import train_task


@flow(name="train")
def train_flow(workspace_path: str, policy: str = "act", preset: str = "cpu", steps: int | None = None,
               torch_threads: int | None = None) -> TrainResult:
    """Train (or resume) WS/policies/<policy>-<preset> with lerobot's training on the delivered dataset."""
    return train_task(workspace_path, policy, preset, steps, torch_threads)
