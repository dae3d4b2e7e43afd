"""Prefect flows: one per phase, and `farm` composing them. With no PREFECT_API_URL, Prefect runs
embedded (an ephemeral server in this process); with one, the runs show in that server's UI."""

from __future__ import annotations

import logging

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from datafarm.costs import CostLedger
from datafarm.farm import PHASES, episodes
from datafarm.farm.prepare import settings_of
from datafarm.workspace import Workspace, WorkspaceError
from tasks.farm_tasks import (harvest_task, phase_task, publish_phase_cost, render_episode_task, review_episode_task,
                              rollout_episode_task, verify_task)

log = logging.getLogger(__name__)
MAX_ROUNDS = 4  # rollout -> render -> review rounds, topping up episodes the review rejected


@flow(name="survey")
def survey_flow(workspace_path: str, force: bool = False):
    return phase_task(workspace_path, "survey", force)


@flow(name="build")
def build_flow(workspace_path: str, force: bool = False):
    return phase_task(workspace_path, "build", force)


@flow(name="contract")
def contract_flow(workspace_path: str, force: bool = False):
    phase_task(workspace_path, "contract", force)
    return phase_task(workspace_path, "review_contract", force)


@flow(name="judge")
def judge_flow(workspace_path: str, force: bool = False):
    return phase_task(workspace_path, "judge", force)


@flow(name="expert")
def expert_flow(workspace_path: str, force: bool = False):
    return phase_task(workspace_path, "expert", force)


def _wanted(workspace: Workspace) -> int:
    """How many more simulated episodes are needed: the target minus those kept and not rejected."""
    rejected = {i for i in episodes.kept_episodes(workspace) if _review(workspace, i) is False}
    return settings_of(workspace).target_count - (len(episodes.kept_episodes(workspace)) - len(rejected))


def _review(workspace: Workspace, index: int) -> bool | None:
    path = workspace.path(episodes.episode_dir(index), "review.json")
    return workspace.read_json(f"{episodes.episode_dir(index)}/review.json")["admitted"] if path.exists() else None


@flow(name="rollout")
def rollout_flow(workspace_path: str) -> dict:
    """Seeded episodes until enough are kept; each seed is tried once (the attempts log survives a kill)."""
    workspace = Workspace.open(workspace_path)
    settings = settings_of(workspace)
    budget = int(settings.max_attempts_factor * settings.target_count) + 10
    tried = len(episodes.attempts(workspace))
    kept = episodes.kept_episodes(workspace)
    index = (max(kept) + 1) if kept else 0
    while _wanted(workspace) > 0:
        if tried >= budget:
            raise WorkspaceError(f"rollout gave up after {tried} seeds: only {len(episodes.kept_episodes(workspace))} "
                                 f"episodes passed the hidden judge (target {settings.target_count}); see "
                                 f"{workspace.path(episodes.ATTEMPTS)} for the reasons")
        attempt = rollout_episode_task(workspace_path, episodes.next_seed(workspace), index)
        tried += 1
        if attempt.accepted:
            index += 1
    publish_phase_cost(workspace, "rollout")
    done = episodes.attempts(workspace)
    return {"attempted": len(done), "accepted": sum(a.accepted for a in done)}


@flow(name="render")
def render_flow(workspace_path: str) -> int:
    workspace = Workspace.open(workspace_path)
    renderer = settings_of(workspace).renderer
    todo = [i for i in episodes.kept_episodes(workspace)
            if not all(p.exists() for p in episodes.rendered_videos(workspace, i).values())]
    for index in todo:
        render_episode_task(workspace_path, index, renderer)
    publish_phase_cost(workspace, "render")
    return len(todo)


@flow(name="review")
def review_flow(workspace_path: str) -> int:
    workspace = Workspace.open(workspace_path)
    todo = [i for i in episodes.kept_episodes(workspace) if _review(workspace, i) is None]
    for index in todo:
        review_episode_task(workspace_path, index)
    publish_phase_cost(workspace, "review")
    return len(todo)


@flow(name="harvest")
def harvest_flow(workspace_path: str) -> dict:
    return harvest_task(workspace_path)


@flow(name="verify")
def verify_flow(workspace_path: str):
    return verify_task(workspace_path)


_AUTHORING = {"survey": survey_flow, "build": build_flow, "contract": contract_flow, "judge": judge_flow,
              "expert": expert_flow}


def _selected(phase: str | None, until: str | None) -> list[str]:
    order = [p for p in PHASES if p != "review_contract"]
    for name in (phase, until):
        if name is not None and name not in order:
            raise WorkspaceError(f"unknown phase {name!r}; phases: {order}")
    if phase:
        return [phase]
    return order[: order.index(until) + 1] if until else order


@flow(name="farm")
def farm_flow(workspace_path: str, phase: str | None = None, until: str | None = None):
    """Every phase in order (or one, or up to one); done phases are skipped, so a rerun resumes."""
    selected = _selected(phase, until)
    for name in selected:
        if name in _AUTHORING:
            _AUTHORING[name](workspace_path)
    episodic = [p for p in ("rollout", "render", "review") if p in selected]
    for _ in range(MAX_ROUNDS if episodic else 0):
        if "rollout" in episodic:
            rollout_flow(workspace_path)
        if "render" in episodic:
            render_flow(workspace_path)
        if "review" in episodic:
            review_flow(workspace_path)
        if "rollout" not in episodic or _wanted(Workspace.open(workspace_path)) <= 0:
            break
    report = None
    if "harvest" in selected:
        harvest_flow(workspace_path)
    if "verify" in selected:
        report = verify_flow(workspace_path)
    publish_summary(Workspace.open(workspace_path))
    return report


def publish_summary(workspace: Workspace) -> str:
    """A markdown artifact: $ per accepted episode and per hour of three-view data, per phase."""
    ledger = CostLedger(workspace.root)
    admitted = episodes.admitted_episodes(workspace)
    seconds = 0.0
    for index in admitted:
        meta = workspace.read_json(f"{episodes.episode_dir(index)}/sim/episode.json")
        seconds += meta["frames"] / meta["fps"]
    total = ledger.total()
    lines = [f"# DataFarm run: {workspace.meta.get('task', '?')}", "",
             f"- admitted episodes: {len(admitted)} of target {settings_of(workspace).target_count}",
             f"- total cost: ${total:.4f}",
             f"- per accepted episode: ${total / max(1, len(admitted)):.4f}",
             f"- per hour of three-view data: ${total / max(seconds / 3600, 1e-9):.2f} ({seconds:.0f} s recorded)",
             "", "| phase | USD |", "|---|---|"]
    lines += [f"| {phase} | {items['total']:.5f} |" for phase, items in ledger.by_phase().items()]
    markdown = "\n".join(lines)
    create_markdown_artifact(markdown=markdown, key="farm-summary", description=f"workspace {workspace.root.name}")
    return markdown
