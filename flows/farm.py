"""Prefect flows: one per flow name of the phase registry, and `farm` running them in its order. With no
PREFECT_API_URL, Prefect runs embedded (an ephemeral server in this process); with one, the runs show
in that server's UI. Thin: the loops are the library's (datafarm.farm.collect); flows call them with
Prefect tasks for the per-item work.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

import flows.run_logs  # noqa: F401  (a deployment loads this file as a script: register our log lines here too)
from datafarm.errors import Unavailable
from datafarm.farm.collect import EpisodeSteps, Finished, Started, collect_episodes
from datafarm.farm.deliver import VerifyReport
from datafarm.farm.prepare import settings_of
from datafarm.farm.registry import FLOWS, phases_of_flow, selected_phases
from datafarm.farm.runner import PhaseOutcome
from datafarm.farm.settings import FarmSettings
from datafarm.storage import push_destination
from datafarm.workspace import Workspace
from datafarm.workspace.lock import farm_lock
from tasks.farm_tasks import (harvest_task, phase_task, publish_phase_cost, render_episode_task, review_episode_task,
                              rollout_seed_task, verify_task)
from tasks.request_tasks import publish_run_report_task
from tasks.storage_tasks import push_task

log = logging.getLogger(__name__)


def run_label() -> str:
    """Who holds a farm lock: this flow run (name and id), or the process when no run is known."""
    from prefect.runtime import flow_run

    return f"flow run {flow_run.name!r} ({flow_run.id})" if flow_run.id else "a run outside Prefect"


def locked(workspace_path: str):
    """The workspace's farm lock for this run (re-entered by the flows `farm` runs inside it)."""
    Workspace.open(workspace_path)  # a missing workspace says so, not the lock
    return farm_lock(Path(workspace_path), run_label())


def _run_phases(flow_name: str, workspace_path: str, phases: list[str] | None, force: bool) -> list[PhaseOutcome]:
    with locked(workspace_path):
        return [phase_task(workspace_path, phase, force) for phase in phases or phases_of_flow(flow_name)]


@flow(name="survey")
def survey_flow(workspace_path: str, phases: list[str] | None = None, force: bool = False) -> list[PhaseOutcome]:
    return _run_phases("survey", workspace_path, phases, force)


@flow(name="build")
def build_flow(workspace_path: str, phases: list[str] | None = None, force: bool = False) -> list[PhaseOutcome]:
    return _run_phases("build", workspace_path, phases, force)


@flow(name="contract")
def contract_flow(workspace_path: str, phases: list[str] | None = None, force: bool = False) -> list[PhaseOutcome]:
    return _run_phases("contract", workspace_path, phases, force)


@flow(name="judge")
def judge_flow(workspace_path: str, phases: list[str] | None = None, force: bool = False) -> list[PhaseOutcome]:
    return _run_phases("judge", workspace_path, phases, force)


@flow(name="expert")
def expert_flow(workspace_path: str, phases: list[str] | None = None, force: bool = False) -> list[PhaseOutcome]:
    return _run_phases("expert", workspace_path, phases, force)


def rollout_runner(settings: FarmSettings) -> TaskRunner:
    """Where the episodes flow's rollouts run (the rollout_runner setting): threads of this process, each
    waiting on its sandboxed simulation, or the processes of a Dask (prefect-dask) or Ray (prefect-ray)
    cluster: a local one of rollout_workers processes, or the existing one at cluster_address."""
    return _RUNNERS[settings.rollout_runner](settings)


def _threads_runner(settings: FarmSettings) -> TaskRunner:
    return ThreadPoolTaskRunner(max_workers=settings.rollout_workers + 1)  # + 1: the review beside the render


def _dask_runner(settings: FarmSettings) -> TaskRunner:
    runner = _runner_class("dask", "prefect_dask", "DaskTaskRunner")
    if settings.cluster_address:
        return runner(address=settings.cluster_address)
    return runner(cluster_kwargs={"n_workers": settings.rollout_workers, "threads_per_worker": 1, "processes": True,
                                  "dashboard_address": None, "env": _flow_api()})


def _ray_runner(settings: FarmSettings) -> TaskRunner:
    runner = _runner_class("ray", "prefect_ray", "RayTaskRunner")
    options = {"runtime_env": {"env_vars": _flow_api()}, "logging_level": logging.ERROR, "log_to_driver": False}
    if settings.cluster_address:
        return runner(address=settings.cluster_address, init_kwargs=options)
    # each rollout task asks for one CPU, so rollout_workers CPUs run that many at once; rollouts pass only
    # small results (the episodes are files), so the object store stays small
    return runner(init_kwargs={**options, "num_cpus": settings.rollout_workers, "include_dashboard": False,
                               "object_store_memory": 200 * 2**20})


_RUNNERS = {"threads": _threads_runner, "dask": _dask_runner, "ray": _ray_runner}


def _runner_class(extra: str, module: str, name: str) -> type[TaskRunner]:
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as error:
        raise Unavailable(f"rollout_runner {extra!r} needs prefect-{extra}: pip install 'datafarm[{extra}]' (or set "
                          "rollout_runner to threads)") from error


def _flow_api() -> dict[str, str]:
    """The cluster's processes report their task runs to this flow's Prefect API: with an embedded server,
    each would otherwise start a server of its own (an existing cluster needs a PREFECT_API_URL it can reach)."""
    return {"PREFECT_API_URL": str(get_client(sync_client=True).api_url)}


@flow(name="episodes")
def episodes_flow(workspace_path: str, phases: list[str] | None = None) -> dict:
    """Rollout -> render -> review rounds (or the phases given) until the target is admitted."""
    workspace = Workspace.open(workspace_path)
    phases = phases or list(phases_of_flow("episodes"))
    # Threads: rollouts wait on sandboxed simulations in the runner's threads while this thread renders and
    # one more reviews the episode rendered before, so every core works. A Dask or Ray cluster: rollouts,
    # renders and reviews all run in its processes (each with sandboxes of its own), as many at once as it
    # has workers.
    settings = settings_of(workspace)
    threads = settings.rollout_runner == "threads"
    with locked(workspace_path), rollout_runner(settings) as runner:
        def run(task, **parameters) -> Started:
            if threads:
                return Finished(task(workspace_path, **parameters))
            return runner.submit(task, {"workspace_path": workspace_path, **parameters})

        steps = EpisodeSteps(
            rollout=lambda seed, slot: runner.submit(
                rollout_seed_task, {"workspace_path": workspace_path, "seed": seed, "slot": slot if threads else None}),
            render=lambda index: run(render_episode_task, index=index),
            review=lambda index: runner.submit(review_episode_task, {"workspace_path": workspace_path, "index": index}),
            at_once=1 if threads else settings.rollout_workers)
        report = collect_episodes(workspace, steps, phases)
    for phase in phases:
        publish_phase_cost(workspace, phase)
    return report


@flow(name="harvest")
def harvest_flow(workspace_path: str, phases: list[str] | None = None) -> dict:
    with locked(workspace_path):
        return harvest_task(workspace_path)


@flow(name="verify")
def verify_flow(workspace_path: str, phases: list[str] | None = None):
    return verify_task(workspace_path)


@flow(name="push")
def push_flow(workspace_path: str, destination: str | None = None) -> dict:
    """The verified delivery to S3: `destination` (s3://bucket/prefix), else the workspace's push_to setting.
    Objects already there (same size and SHA-256) are skipped, so a rerun with nothing new uploads nothing."""
    location = push_destination(Workspace.open(workspace_path), destination)
    with locked(workspace_path):
        return push_task(workspace_path, str(location))


def _push_if_set(workspace_path: str, report: VerifyReport) -> None:
    """After verify: push to the workspace's push_to destination, if it has one and the delivery verifies."""
    destination = settings_of(Workspace.open(workspace_path)).push_to
    if destination is None:
        return
    if not report.ok:
        log.warning("not pushed to %s: the delivery does not verify (%d problems)", destination, len(report.problems))
        return
    push_flow(workspace_path, destination)


FLOW_OF = {"survey": survey_flow, "build": build_flow, "contract": contract_flow, "judge": judge_flow,
           "expert": expert_flow, "episodes": episodes_flow, "harvest": harvest_flow, "verify": verify_flow}


@flow(name="farm")
def farm_flow(workspace_path: str, phase: str | None = None, until: str | None = None):
    """Every phase in the registry's order (or one, or up to one); done work is skipped, so a rerun resumes.

    One farm run per workspace: the run holds the workspace's farm lock; a second is refused naming it.
    With a push_to setting, a delivery that verifies is then pushed there (the `push` flow)."""
    selected = selected_phases(phase, until)
    report = None
    with locked(workspace_path):
        for name in FLOWS:
            phases = [p for p in phases_of_flow(name) if p in selected]
            if phases:
                result = FLOW_OF[name](workspace_path, phases=phases)
                report = result if name == "verify" else report
        if report is not None:
            _push_if_set(workspace_path, report)
        publish_run_report_task(workspace_path)
    return report
