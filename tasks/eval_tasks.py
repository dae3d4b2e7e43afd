"""Prefect tasks of closed-loop evaluation: a batch of trials per task run, the success table and plots published.

Each batch runs in a process of its own (datafarm.policy.evaluate.run_batch_in_process), so a flow
submitting several batches at once evaluates in parallel. A batch's trials are files: a retried or
rerun batch skips the trials already written.
"""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from datafarm.policy.evaluate import EvalRun, run_batch_in_process
from datafarm.policy.report import cells, write_report
from datafarm.workspace import Workspace
from tasks.farm_tasks import TRANSIENT_RETRIES, artifact_key, publish_phase_cost


@task(name="eval-trials", task_run_name="{run.name} {run.appearance}: seeds from {seeds[0]}",
      cache_policy=NO_CACHE, **TRANSIENT_RETRIES)
def eval_batch_task(run: EvalRun, seeds: list[int], torch_threads: int | None = None) -> int:
    return run_batch_in_process(run, [seed for seed in seeds if not run.trial_file(seed).exists()], torch_threads)


@task(name="eval-report", cache_policy=NO_CACHE)
def eval_report_task(workspace_path: str) -> str:
    """Write the report; publish the success table, the plots (links) and the evaluation's cost."""
    workspace = Workspace.open(workspace_path)
    report = write_report(workspace)
    table = [{"task": c.task, "policy": c.policy, "appearance": c.appearance, "successes": c.successes,
              "trials": c.trials, "rate": round(c.rate, 3), "wilson_low": round(c.low, 3),
              "wilson_high": round(c.high, 3)} for c in cells(workspace)]
    if table:
        create_table_artifact(table=table, key=artifact_key(f"eval-success-{workspace.root.name}"),
                              description=f"closed-loop success in simulation, {workspace.root.name}")
    plots = sorted(report.parent.glob("*.png"))
    create_markdown_artifact(
        key=artifact_key(f"eval-report-{workspace.root.name}"), description="evaluation report and plots",
        markdown="\n".join([f"[report]({report.resolve().as_uri()})"]
                           + [f"- [{p.name}]({p.resolve().as_uri()})" for p in plots]))
    publish_phase_cost(workspace, "eval")
    return str(report)
