"""Prefect tasks of the farm. Each wraps one library call, declares its retries (I/O only), its
cache key (from the workspace's recorded inputs, so a crashed run resumes) and publishes its cost."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

from prefect import task
from prefect.artifacts import create_table_artifact

from datafarm.costs import CostLedger
from datafarm.farm import authoring, deliver, episodes, prepare
from datafarm.farm.runner import PhaseOutcome, run_phase
from datafarm.workspace import Workspace

_PHASE_WORK = {
    "survey": prepare.survey,
    "build": authoring.build,
    "contract": authoring.contract,
    "review_contract": authoring.review_contract,
    "judge": authoring.write_judge,
    "expert": authoring.write_expert,
}


@contextmanager
def _accounted(workspace: Workspace, phase: str, episode: int | None = None):
    """Charge the block's CPU to the ledger and log its wall time."""
    started = time.perf_counter()
    with CostLedger(workspace.root).measure_cpu(phase, episode=episode):
        yield
    workspace.log_timing(phase, time.perf_counter() - started, episode)


def _artifact_key(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def publish_phase_cost(workspace: Workspace, phase: str) -> None:
    """A table artifact per phase: what, quantity, unit price, USD."""
    entries = [e for e in CostLedger(workspace.root).entries() if e.phase == phase]
    if not entries:
        return
    rows = {}
    for entry in entries:
        row = rows.setdefault(entry.item, {"what": entry.item, "quantity": 0.0, "unit": entry.unit,
                                           "unit_price_usd": entry.unit_price, "usd": 0.0})
        row["quantity"] += entry.quantity
        row["usd"] += entry.usd
    table = [{**r, "quantity": round(r["quantity"], 3), "usd": round(r["usd"], 6)} for r in rows.values()]
    create_table_artifact(table=table, key=_artifact_key(f"cost-{phase}"),
                          description=f"{phase} cost for workspace {workspace.root.name}")


@task(name="phase", task_run_name="{phase}", cache_policy=None)
def phase_task(workspace_path: str, phase: str, force: bool = False) -> PhaseOutcome:
    workspace = Workspace.open(workspace_path)
    started = time.perf_counter()
    outcome = run_phase(workspace, phase, lambda: _PHASE_WORK[phase](workspace), force)
    workspace.log_timing(phase, time.perf_counter() - started)
    publish_phase_cost(workspace, phase)
    return outcome


def _episode_key(context, parameters) -> str:
    """Cache key: the workspace, the seed and the task package (a crashed run resumes per episode)."""
    workspace = Workspace.open(parameters["workspace_path"])
    return f"rollout:{Path(parameters['workspace_path']).resolve()}:{workspace.output_hash('expert')}:{parameters['seed']}"


@task(name="rollout-episode", task_run_name="rollout seed {seed}", cache_key_fn=_episode_key, persist_result=True)
def rollout_episode_task(workspace_path: str, seed: int, index: int) -> episodes.Attempt:
    workspace = Workspace.open(workspace_path)
    package = authoring.workspace_package(workspace)
    with _accounted(workspace, "rollout", index):
        return episodes.rollout_episode(workspace, package, seed, index)


# Render workers are remote services on GPU nodes in a cluster: retry those I/O failures.
@task(name="render-episode", task_run_name="render episode {index}", retries=2, retry_delay_seconds=5,
      tags=["render"], cache_policy=None)
def render_episode_task(workspace_path: str, index: int, renderer_name: str) -> dict[str, str]:
    from datafarm.render import get_renderer

    workspace = Workspace.open(workspace_path)
    renderer = get_renderer(renderer_name)
    references = episodes.calibration_references(workspace)
    with _accounted(workspace, "render", index):
        paths = episodes.render_episode(workspace, index, renderer, references, episodes.texture_pool())
    return {camera: str(path) for camera, path in paths.items()}


@task(name="review-episode", task_run_name="review episode {index}", cache_policy=None)
def review_episode_task(workspace_path: str, index: int) -> dict:
    workspace = Workspace.open(workspace_path)
    with _accounted(workspace, "review", index):
        return episodes.review_episode(workspace, index)


# Writing the dataset (and, with an upload, storage) is I/O: retry.
@task(name="harvest", retries=2, retry_delay_seconds=5, cache_policy=None)
def harvest_task(workspace_path: str) -> dict:
    workspace = Workspace.open(workspace_path)
    instruction = workspace.read_json("contract.json")["instruction"]
    with _accounted(workspace, "harvest"):
        report = deliver.harvest(workspace, instruction)
    publish_phase_cost(workspace, "harvest")
    return report


@task(name="verify", cache_policy=None)
def verify_task(workspace_path: str) -> deliver.VerifyReport:
    workspace = Workspace.open(workspace_path)
    with _accounted(workspace, "verify"):
        return deliver.verify(workspace)
