"""Prefect task of the storage: the verified delivery pushed to S3 (datafarm.storage.push).

A store that does not answer, a 5xx or a dropped connection is transient (StoreUnreachable) and retried;
a retry resumes: objects already there are skipped, an unfinished multipart upload continues. A missing
bucket, refused credentials or a delivery that does not verify are permanent and fail at once.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from datafarm.farm.runner import accounted
from datafarm.logs import NOTABLE
from datafarm.storage import PushReport, load_storage_settings, parse_s3_uri, push
from datafarm.workspace import Workspace
from tasks.farm_tasks import TRANSIENT_RETRIES, publish_phase_cost, workspace_artifact_key

log = logging.getLogger(__name__)

PUSH_PHASE = "push"  # the cost ledger's name for it (after the registry's phases in `datafarm cost`)


def push_summary(report: PushReport) -> str:
    """One line: what went up, what was there already, what was removed, how long it took."""
    deleted = f", {len(report.deleted)} stale objects deleted" if report.deleted else ""
    resumed = f", {report.parts_reused} parts resumed" if report.parts_reused else ""
    return (f"pushed to {report.destination}: {len(report.uploaded)} files uploaded "
            f"({report.bytes_uploaded / 1e6:.2f} MB{resumed}), {len(report.skipped)} already there{deleted}, "
            f"in {report.seconds:.1f} s")


@task(name="push", task_run_name="push to {destination}", cache_policy=NO_CACHE, **TRANSIENT_RETRIES)
def push_task(workspace_path: str, destination: str) -> dict:
    """Push the delivery of the workspace to `destination` (s3://bucket/prefix); the report as a dict."""
    workspace = Workspace.open(workspace_path)
    location = parse_s3_uri(destination)
    with accounted(workspace, PUSH_PHASE):
        report = push(workspace, location, load_storage_settings())
    summary = push_summary(report)
    log.info("%s", summary, extra=NOTABLE)
    publish_phase_cost(workspace, PUSH_PHASE)
    create_markdown_artifact(markdown=f"{summary}; check it with `datafarm verify {report.destination}`",
                             key=workspace_artifact_key(workspace, "push"),
                             description=f"push of workspace {workspace.root.name}")
    return asdict(report)
