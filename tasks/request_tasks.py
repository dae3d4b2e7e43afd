"""Prefect tasks of API-triggered requests and scheduled harvesting: one library call each.

Checking a request never retries (a bad parameter stays bad); preparing one retries transient errors
(an S3 download, the file system). Each farm run ends with its markdown report, keyed per workspace.
"""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from datafarm.farm.fleet import Registry, farm_root
from datafarm.farm.requests import RequestPlan, plan_request, prepare_request
from datafarm.farm.run_report import WorkspaceFigures, figures, first_admitted_sheet, run_report
from datafarm.farm.top_up import TopUpDecision, decide
from datafarm.workspace import Workspace
from tasks.farm_tasks import TRANSIENT_RETRIES, artifact_key, workspace_artifact_key


@task(name="check-request", cache_policy=NO_CACHE)
def check_request_task(parameters: dict) -> RequestPlan:
    return plan_request(parameters)


@task(name="prepare-request", task_run_name="prepare {plan.workspace.name}", cache_policy=NO_CACHE,
      **TRANSIENT_RETRIES)
def prepare_request_task(plan: RequestPlan) -> str:
    return str(prepare_request(plan).root)


@task(name="farm-report", cache_policy=NO_CACHE)
def publish_run_report_task(workspace_path: str) -> str:
    """The run's markdown artifact: admitted/tried, cost per phase and per episode, the first contact sheet."""
    workspace = Workspace.open(workspace_path)
    markdown = run_report(workspace, first_admitted_sheet(workspace))
    create_markdown_artifact(markdown=markdown, key=workspace_artifact_key(workspace, "farm-report"),
                             description=f"farm run of workspace {workspace.root.name}")
    return markdown


@task(name="workspace-figures", task_run_name="figures of {workspace_path}", cache_policy=NO_CACHE)
def figures_task(workspace_path: str) -> WorkspaceFigures:
    return figures(Workspace.open(workspace_path))


@task(name="plan-top-up", cache_policy=NO_CACHE)
def plan_top_up_task(episodes_per_run: int | None) -> list[TopUpDecision]:
    return [decide(entry, episodes_per_run) for entry in Registry(farm_root()).entries()]


@task(name="top-up-summary", cache_policy=NO_CACHE)
def publish_top_up_summary_task(rows: list[dict]) -> None:
    """One table per scheduled run: per workspace, what was done, episodes added, cost, failure."""
    create_table_artifact(table=rows or [{"workspace": "(none registered)", "action": "nothing to do"}],
                          key=artifact_key("top-up-summary"),
                          description=f"scheduled harvest of the workspaces registered under {farm_root()}")
