"""Prefect task of policy training: one library call, its cost and loss curve published as artifacts."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from datafarm.policy.train import TrainResult, train_policy
from datafarm.workspace import Workspace
from tasks.farm_tasks import TRANSIENT_RETRIES, artifact_key, publish_phase_cost


def publish_training(workspace: Workspace, result: TrainResult) -> None:
    """The cost table, the loss curve (an image link) and the run's figures as a table."""
    name = result.folder.name
    publish_phase_cost(workspace, f"train:{name}")
    create_markdown_artifact(
        key=artifact_key(f"loss-curve-{name}-{workspace.root.name}"),
        description=f"loss curve of {name} in {workspace.root.name}",
        markdown=f"![loss curve of {name}]({result.loss_curve.resolve().as_uri()})\n\n"
                 f"`{result.loss_curve.resolve()}`")
    timing = result.timing
    create_table_artifact(key=artifact_key(f"training-{name}-{workspace.root.name}"),
                          description=f"training run of {name} in {workspace.root.name}", table=[{
        "steps": result.steps_done, "resumed_from": result.resumed_from, "final_loss": result.final_loss,
        "seconds_per_step": round(timing.seconds_per_step, 3) if timing else None,
        "loading_share": round(timing.loading_share, 3) if timing else None,
        "wall_s": round(result.wall_seconds, 1), "cpu_s": round(result.cpu_seconds, 1),
        "gpu_s": round(result.gpu_seconds, 1), "folder": str(result.folder)}])


# A killed training (TrainingInterrupted, transient) resumes from its last checkpoint on retry.
@task(name="train-policy", task_run_name="train {policy}-{preset}", cache_policy=NO_CACHE, **TRANSIENT_RETRIES)
def train_task(workspace_path: str, policy: str, preset: str, steps: int | None = None,
               torch_threads: int | None = None) -> TrainResult:
    workspace = Workspace.open(workspace_path)
    result = train_policy(workspace.root, policy, preset, steps=steps, torch_threads=torch_threads)
    publish_training(workspace, result)
    return result
