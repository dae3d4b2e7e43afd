"""Prefect tasks of the farm. Each wraps one library call and publishes its cost.

No task caches its result: a task's real output is files in the workspace, and the workspace's own
records (phase records with hashes, rollout/attempts.jsonl, per-episode files) are the one resume
mechanism. Tasks retry only transient errors (`datafarm.errors.is_transient`).
"""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from datafarm.errors import is_transient
from datafarm.farm import collect, deliver, episodes
from datafarm.farm.runner import PhaseOutcome, accounted, run_phase
from datafarm.farm.summary import phase_cost_rows
from datafarm.workspace import Workspace


def retry_if_transient(task, task_run, state) -> bool:
    """Prefect's retry_condition_fn: retry a provider's 5xx, a time-out or an I/O failure, nothing else."""
    error = state.data if isinstance(state.data, BaseException) else None
    return error is not None and is_transient(error)


TRANSIENT_RETRIES = {"retries": 2, "retry_delay_seconds": 5, "retry_condition_fn": retry_if_transient}


def artifact_key(text: str) -> str:
    """Prefect's artifact keys allow lowercase ASCII letters, digits and dashes only."""
    key = "".join(c if c.isascii() and c.isalnum() else "-" for c in text.lower())
    return "-".join(part for part in key.split("-") if part)


def workspace_artifact_key(workspace: Workspace, what: str) -> str:
    """`<what>-<workspace folder>`: one key per workspace, so workspaces never overwrite each other's."""
    return artifact_key(f"{what}-{workspace.root.name}")


def publish_phase_cost(workspace: Workspace, phase: str) -> None:
    """A table artifact per phase and workspace: what, quantity, unit price, USD (the ledger's totals, so a
    rerun publishes a new version of the same key with the totals, never the costs added twice)."""
    table = phase_cost_rows(workspace, phase)
    if table:
        create_table_artifact(table=table, key=workspace_artifact_key(workspace, f"cost-{phase}"),
                              description=f"{phase} cost for workspace {workspace.root.name}")


# An LLM author's provider can fail transiently (its own retries spent): retry those.
@task(name="phase", task_run_name="{phase}", cache_policy=NO_CACHE, **TRANSIENT_RETRIES)
def phase_task(workspace_path: str, phase: str, force: bool = False) -> PhaseOutcome:
    workspace = Workspace.open(workspace_path)
    outcome = run_phase(workspace, phase, force)
    publish_phase_cost(workspace, phase)
    return outcome


@task(name="rollout-seed", task_run_name="rollout seed {seed}", cache_policy=NO_CACHE)
def rollout_seed_task(workspace_path: str, seed: int, slot: int | None) -> episodes.Staged:
    return collect.rollout_one(Workspace.open(workspace_path), seed, slot)


# Render workers are remote services on GPU nodes in a cluster: retry their transient failures.
@task(name="render-episode", task_run_name="render episode {index}", tags=["render"], cache_policy=NO_CACHE,
      **TRANSIENT_RETRIES)
def render_episode_task(workspace_path: str, index: int) -> dict[str, str]:
    paths = collect.render_one(Workspace.open(workspace_path), index)
    return {camera: str(path) for camera, path in paths.items()}


@task(name="review-episode", task_run_name="review episode {index}", cache_policy=NO_CACHE)
def review_episode_task(workspace_path: str, index: int) -> dict:
    return collect.review_one(Workspace.open(workspace_path), index)


# Writing the dataset (and, with an upload, storage) is I/O: retry its transient failures.
@task(name="harvest", cache_policy=NO_CACHE, **TRANSIENT_RETRIES)
def harvest_task(workspace_path: str) -> dict:
    workspace = Workspace.open(workspace_path)
    with accounted(workspace, "harvest"):
        report = deliver.harvest(workspace)
    publish_phase_cost(workspace, "harvest")
    return report


@task(name="verify", cache_policy=NO_CACHE)
def verify_task(workspace_path: str) -> deliver.VerifyReport:
    workspace = Workspace.open(workspace_path)
    with accounted(workspace, "verify"):
        return deliver.verify(workspace)
