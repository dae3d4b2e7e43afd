"""The deployments against a real Prefect server: built from prefect.yaml by `prefect deploy`, run by a
process work-pool worker. Bad requests are refused before any work; one farm run per workspace; our log
lines and per-workspace artifacts reach the API; a small request is farmed and delivered end to end;
the scheduled top-up skips what it must and publishes its summary."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from datafarm.workspace.lock import LOCK_FILE, acquire, release

pytestmark = pytest.mark.slow
DATAFARM = Path(sys.executable).parent / "datafarm"


def wait_final(run_id: str, timeout: float = 300):
    from flows.remote import run_status

    deadline = time.time() + timeout
    while time.time() < deadline:
        status = run_status(str(run_id))
        if status.final:
            return status
        time.sleep(2)
    raise TimeoutError(f"flow run {run_id} not final after {timeout} s")


def trigger(name: str, parameters: dict):
    from flows.remote import submit_request

    return submit_request(parameters, deployment=name)


def run_logs(run_id: str) -> list[tuple[str, str]]:
    """(logger name, message) of a flow run and its subflow runs, as the UI shows them."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterParentFlowRunId, LogFilter,
                                                LogFilterFlowRunId)

    with get_client(sync_client=True) as client:
        ids = [uuid.UUID(str(run_id))]
        ids += [r.id for r in client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=ids)))]
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)))
    return [(log.name, log.message) for log in logs]


def artifacts(key: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                                     sort=ArtifactSort.CREATED_DESC)


def table(artifact) -> list[dict]:
    return json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data


@pytest.fixture(scope="module")
def manual_workspaces(synthetic_calibration, farm_env):
    """Two workspaces prepared by hand under the farm root (not through a request)."""
    from datafarm.farm.prepare import prepare
    from datafarm.farm.settings import FarmSettings

    base = Path(farm_env["DATAFARM_FARM_ROOT"]) / "manual"
    return [prepare(synthetic_calibration, "Put the apple on the scale.", base / name,
                    FarmSettings(target_count=1, expert_trial_seeds=2)).root for name in ("lock-ws", "other-ws")]


def test_prefect_deploy_builds_every_deployment_its_pools_and_the_schedule(api):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        deployments = {d.name: d for d in client.read_deployments()}
        pools = {p.name: p.type for p in client.read_work_pools()}
    assert {"request", "top-up", "farm", "render", "verify", "train", "eval_sim", "real_eval"} <= set(deployments)
    assert pools == {"datafarm-cpu": "process", "datafarm-gpu": "process", "datafarm-robot": "process"}
    assert [s.schedule.cron for s in deployments["top-up"].schedules] == ["0 2 * * *"]
    assert deployments["request"].pull_steps == [{"flows.deploy_steps.enter_repository": {}}]


def test_a_bad_request_is_refused_before_any_work(worker, farm_env, tmp_path):
    """Through the command line, as a user does: submit prints the run's link, status follows it."""
    request = tmp_path / "request.txt"
    request.write_text("Put the apple on the scale.")
    env = worker.env
    submitted = subprocess.run([str(DATAFARM), "submit", "--request-file", str(request), "--episode", "/etc",
                                "--target-count", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.split("(")[1].split(")")[0]
    assert f"/runs/flow-run/{run_id}" in submitted.stdout.replace("\n", "")
    status = subprocess.run([str(DATAFARM), "status", run_id, "--wait", "--interval", "2"], env=env,
                            capture_output=True, text=True, timeout=400)
    assert status.returncode == 1, status.stdout + status.stderr
    assert "Failed" in status.stdout and "outside the allowed roots" in " ".join(status.stdout.split())
    assert not (Path(farm_env["DATAFARM_FARM_ROOT"]) / "workspaces").exists()  # nothing prepared


def test_an_unknown_renderer_and_a_bad_count_are_refused_by_the_deployment(worker, api, farm_env):
    episode = str(Path(farm_env["DATAFARM_ALLOWED_ROOTS"]))
    runs = [trigger("request/request", {"request": "Put the apple on the scale.", "episode": episode, **bad})
            for bad in ({"renderer": "photoreal"}, {"target_count": 0})]
    messages = [wait_final(run.id).message for run in runs]
    assert "unknown renderer 'photoreal'" in messages[0] and "target_count" in messages[1]
    assert not (Path(farm_env["DATAFARM_FARM_ROOT"]) / "workspaces").exists()


def test_a_second_run_is_refused_naming_the_holder_and_a_dead_holders_lock_is_taken_over(
        worker, api, manual_workspaces):
    workspace = manual_workspaces[0]
    holder = acquire(workspace, "held-by-the-test")
    try:
        refused = wait_final(trigger("farm/farm", {"workspace_path": str(workspace), "phase": "survey"}).id)
    finally:
        release(workspace, holder)
    assert refused.state == "Failed" and "held-by-the-test" in refused.message
    assert f"pid {os.getpid()}" in refused.message
    assert not (workspace / "survey.json").exists()

    crashed = subprocess.Popen([sys.executable, "-c", "pass"])
    crashed.wait()
    now = time.time()
    (workspace / LOCK_FILE).write_text(json.dumps({"run": "crashed run", "pid": crashed.pid,
                                                   "host": socket.gethostname(), "taken": now, "renewed": now,
                                                   "lease_s": 3600.0, "token": "x"}))
    taken = trigger("farm/farm", {"workspace_path": str(workspace), "phase": "survey"})
    assert wait_final(taken.id).state == "Completed"
    assert (workspace / "survey.json").exists() and not (workspace / LOCK_FILE).exists()
    # Our library's lines (the lock's takeover warning, the runner's phase line) are in the run's logs. The
    # worker sends its logs in batches, the last one possibly after the run's final state: wait for it.
    def phase_line_sent(lines) -> bool:
        return any(name == "datafarm.farm.runner" and msg.startswith("survey: done") for name, msg in lines)

    deadline = time.time() + 30
    while not phase_line_sent(lines := run_logs(taken.id)) and time.time() < deadline:
        time.sleep(1)
    assert any(name == "datafarm.workspace.lock" and "taking over the farm lock" in msg for name, msg in lines)
    assert phase_line_sent(lines)
    assert not any(name.startswith("datafarm") for name, _ in run_logs(refused.id) if "survey" in _)


def test_only_the_library_loggers_are_sent_to_the_api(api):
    """Negative control in this process: a logger we did not register stays out of the flow-run logs."""
    from prefect import flow

    import flows  # noqa: F401  (registers the library's loggers)

    @flow
    def probe() -> str:
        from prefect.runtime import flow_run

        logging.getLogger("datafarm.probe").warning("probe from the library")
        logging.getLogger("elsewhere.probe").warning("probe from elsewhere")
        return flow_run.id

    run_id = probe()
    deadline = time.time() + 30  # the log worker sends in batches
    while "probe from the library" not in (messages := [msg for _, msg in run_logs(run_id)]) and time.time() < deadline:
        time.sleep(1)
    assert "probe from the library" in messages and "probe from elsewhere" not in messages


def test_artifacts_are_keyed_per_workspace_and_a_rerun_publishes_totals_not_sums(worker, api, manual_workspaces):
    from datafarm.costs import CostLedger

    first, other = manual_workspaces
    survey = {"phase": "survey"}
    if not artifacts("cost-survey-lock-ws"):  # the lock test surveyed it already when run before
        assert wait_final(trigger("farm/farm", {"workspace_path": str(first), **survey}).id).state == "Completed"
    published = len(artifacts("cost-survey-lock-ws"))
    rerun = wait_final(trigger("farm/farm", {"workspace_path": str(first), **survey}).id)
    assert rerun.state == "Completed"
    assert wait_final(trigger("farm/farm", {"workspace_path": str(other), **survey}).id).state == "Completed"
    versions = artifacts("cost-survey-lock-ws")
    assert len(versions) == published + 1  # a new version per run, under the workspace's own key
    ledger = sum(e.usd for e in CostLedger(first).entries() if e.phase == "survey")
    assert abs(table(versions[0])[0]["usd"] - round(ledger, 6)) < 1e-9  # the rerun skipped: the same total
    assert table(versions[0])[0]["usd"] == table(versions[1])[0]["usd"]
    assert len(artifacts("cost-survey-other-ws")) == 1 and artifacts("farm-report-other-ws")
    assert artifacts("cost-survey") == []  # no shared key that workspaces overwrite


@pytest.mark.timeout(1200)
def test_a_small_request_is_farmed_and_delivered_end_to_end(worker, api, farm_env, synthetic_calibration):
    from datafarm.farm.deliver import verify
    from datafarm.workspace import Workspace

    episode = Path(farm_env["DATAFARM_ALLOWED_ROOTS"]) / "apple"
    shutil.copytree(synthetic_calibration, episode)
    run = trigger("request/request", {"request": "Put the apple on the scale.", "episode": str(episode),
                                      "target_count": 1, "max_usd": 5.0, "settings": {"expert_trial_seeds": 2}})
    status = wait_final(run.id, timeout=1100)
    assert status.state == "Completed", (status.message, worker.worker_log.read_text()[-3000:])
    [workspace] = (Path(farm_env["DATAFARM_FARM_ROOT"]) / "workspaces").iterdir()
    assert workspace.name.startswith("put-the-apple-on-the-scale-")
    assert verify(Workspace.open(workspace)).ok
    [report] = status.reports
    assert "episodes admitted / tried: **1 /" in report and "contact sheet" in report
    sheet = next(line for line in report.splitlines() if line.startswith("contact sheet:")).split("`")[1]
    assert Path(sheet).is_file()
    assert (Path(farm_env["DATAFARM_FARM_ROOT"]) / "registry" / f"{workspace.name}.json").is_file()


def test_the_top_up_skips_complete_spent_and_running_workspaces_and_publishes_one_summary(
        worker, api, manual_workspaces):
    from datafarm.farm.fleet import Registry, farm_root
    from datafarm.workspace import Workspace

    spent, running = manual_workspaces
    registry = Registry(Path(worker.env["DATAFARM_FARM_ROOT"]))
    registry.register(Workspace.open(spent), max_usd=1e-9)  # its survey already cost more
    registry.register(Workspace.open(running))
    holder = acquire(running, "held-by-the-test")
    try:
        status = wait_final(trigger("top-up/top-up", {}).id)
    finally:
        release(running, holder)
    assert status.state == "Completed", status.message
    rows = {row["workspace"]: row for row in table(artifacts("top-up-summary")[0])}
    assert rows["lock-ws"]["action"] == "skip" and rows["lock-ws"]["reason"].startswith("over budget")
    assert rows["other-ws"]["action"] == "skip" and "held-by-the-test" in rows["other-ws"]["reason"]
    delivered = [row for name, row in rows.items() if name.startswith("put-the-apple")]
    if delivered:  # the end-to-end request ran before: complete, nothing to add
        assert delivered[0]["reason"].startswith("complete")
    assert farm_root  # the registry the flow read is the server's farm root
