"""Prefect tasks of the real-robot evaluation: connect the station, preflight it, publish the summary.

The trials themselves run in the flow's own body (flows/real_eval.py): Prefect's pause-for-input, the
operator's go and verdict, pauses a flow run, not a task run.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from datafarm.piper.eval_station import PreflightResult, Station
from datafarm.piper.real_eval import RealEvalRun, combine_trial_datasets, open_station, summarize
from datafarm.workspace import Workspace
from tasks.farm_tasks import artifact_key


@task(name="real-eval-connect", cache_policy=NO_CACHE, persist_result=False)
def connect_station_task(run: RealEvalRun, left_can: str = "can0", right_can: str = "can1",
                         cameras_file: str | None = None) -> Station:
    """Open the arms (and cameras), or the simulated scenes (SimPair, or the real driver on fake firmwares)
    with the task's judge."""
    return open_station(Workspace.open(run.workspace_root), run, left_can, right_can,
                        Path(cameras_file) if cameras_file else None)


@task(name="real-eval-preflight", cache_policy=NO_CACHE, persist_result=False)
def preflight_task(station: Station) -> dict:
    """Feedback fresh, no latched stop or error, then the slow move to the start pose (the rig's rest pose)."""
    result: PreflightResult = station.preflight()
    return result.as_dict()


@task(name="real-eval-summary", cache_policy=NO_CACHE)
def summary_task(run: RealEvalRun) -> dict:
    """Combine the recorded trials into one dataset; publish success with its Wilson interval, every trial's
    verdict and links to its videos; return it."""
    dataset = combine_trial_datasets(run)
    summary = summarize(run) | {"dataset": str(dataset.relative_to(run.workspace_root)) if dataset else None}
    lines = [f"# {run.station} evaluation of {run.name}",
             (f"success {summary['successes']}/{summary['trials']} ({summary['rate']:.0%}), Wilson 95% "
              f"[{summary['wilson_low']:.0%}, {summary['wilson_high']:.0%}]; {summary['estops']} emergency stop(s); "
              f"{summary['planned']} trials planned"),
             f"every recorded trial as one LeRobot dataset: `{summary['dataset']}`" if dataset else "",
             "",
             "| trial | seed | verdict | end | steps | notes | videos |", "|---|---|---|---|---|---|---|"]
    for row in summary["results"]:
        videos = " ".join(f"[{camera}]({(Path(run.workspace_root) / path).resolve().as_uri()})"
                          for camera, path in row["videos"].items()) or "-"
        notes = str(row["notes"]).replace("|", "/").replace("\n", " ")[:200]
        lines.append(f"| {row['index'] + 1} | {row['seed']} | {'success' if row['success'] else 'failure'} | "
                     f"{row['end']} | {row['steps']} | {notes} | {videos} |")
    create_markdown_artifact(key=artifact_key(f"eval-real-{Path(run.workspace_root).name}-{run.name}"),
                             markdown="\n".join(lines), description="real-robot evaluation: success and verdicts")
    return summary
