"""rollout -> render -> review until the target is admitted: the seed search and the top-up rounds.

Plain functions on a workspace. What handles ONE episode in each phase is passed in as
`EpisodeSteps`: the flows pass their Prefect tasks, everything else `library_steps` (the same library
calls, no Prefect). What is done is read from the workspace every time (episodes/NNNNNN/ and
rollout/attempts.jsonl), so a killed run resumes where it stopped and nothing else is remembered.

A round of all three phases is pipelined: while a seed is simulated (in its sandboxed worker process,
started through `EpisodeSteps.start_rollout`: a Prefect task submitted to the flow's task runner), this
process renders and reviews the episodes already kept, so two cores both work. Seeds are still tried one
at a time and in order, so the episodes are those the phases run one after another would make.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from datafarm.errors import PermanentError
from datafarm.farm import episodes
from datafarm.farm.prepare import settings_of
from datafarm.farm.runner import accounted, check_budget
from datafarm.logs import NOTABLE
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

EPISODE_PHASES = ("rollout", "render", "review")
MAX_ROUNDS = 4  # rollout -> render -> review rounds, topping up the episodes the review rejected


class SeedsExhausted(PermanentError):
    """The expert passed the hidden judge too rarely to reach the target within the seed budget."""


class TargetNotReached(PermanentError):
    """The review kept rejecting episodes: the target was not admitted within the rounds allowed."""


# ----- one episode per phase (what a Prefect task wraps) ---------------------------------------------
def rollout_one(workspace: Workspace, seed: int, index: int) -> episodes.Attempt:
    from datafarm.farm.authoring import workspace_package

    package = workspace_package(workspace)
    # the simulation's CPU comes in the sandbox's replies; this thread's own is the rest (it may run beside a render)
    with accounted(workspace, "rollout", index, thread_only=True):
        return episodes.rollout_episode(workspace, package, seed, index)


def render_one(workspace: Workspace, index: int) -> dict[str, Path]:
    from datafarm.render import get_renderer

    settings = settings_of(workspace)
    renderer = get_renderer(settings.renderer, **settings.renderer_options())
    references = episodes.calibration_references(workspace)
    with accounted(workspace, "render", index):
        videos = episodes.render_episode(workspace, index, renderer, references, episodes.texture_pool())
    log.info("episode %d rendered: %s", index, workspace.path(episodes.episode_dir(index), "render"))
    return videos


def review_one(workspace: Workspace, index: int) -> dict:
    with accounted(workspace, "review", index):
        review = episodes.review_episode(workspace, index)
    verdict = "admitted" if review["admitted"] else f"rejected ({'; '.join(review.get('reasons', []))})"
    log.info("episode %d %s: %s", index, verdict, workspace.path(episodes.episode_dir(index), "review.json"),
             extra=NOTABLE)
    return review


class Started(Protocol):
    """A rollout under way (a Prefect future, or one already finished)."""

    def result(self) -> episodes.Attempt: ...


@dataclass(frozen=True)
class Finished:
    attempt: episodes.Attempt

    def result(self) -> episodes.Attempt:
        return self.attempt


@dataclass(frozen=True)
class EpisodeSteps:
    rollout: Callable[[int, int], episodes.Attempt]  # (seed, index) -> the attempt, logged
    render: Callable[[int], object]  # index -> its videos
    review: Callable[[int], object]  # index -> its review
    # (seed, index) -> the rollout under way, while this thread renders and reviews; by default run at once
    start_rollout: Callable[[int, int], Started] | None = None

    def start(self, seed: int, index: int) -> Started:
        return self.start_rollout(seed, index) if self.start_rollout else Finished(self.rollout(seed, index))


def library_steps(workspace: Workspace) -> EpisodeSteps:
    return EpisodeSteps(rollout=lambda seed, index: rollout_one(workspace, seed, index),
                        render=lambda index: render_one(workspace, index),
                        review=lambda index: review_one(workspace, index))


# ----- what is still to do, from the workspace's records -------------------------------------------------
def review_of(workspace: Workspace, index: int) -> bool | None:
    """Whether the review admitted episode `index`; None when it has not been reviewed."""
    if not workspace.path(episodes.episode_dir(index), "review.json").exists():
        return None
    return bool(workspace.read_json(f"{episodes.episode_dir(index)}/review.json")["admitted"])


def wanted(workspace: Workspace) -> int:
    """How many more episodes to simulate: the target minus those kept and not rejected by the review."""
    usable = [i for i in episodes.kept_episodes(workspace) if review_of(workspace, i) is not False]
    return settings_of(workspace).target_count - len(usable)


def to_render(workspace: Workspace) -> list[int]:
    return [i for i in episodes.kept_episodes(workspace)
            if not all(p.exists() for p in episodes.rendered_videos(workspace, i).values())]


def to_review(workspace: Workspace) -> list[int]:
    return [i for i in episodes.kept_episodes(workspace)
            if review_of(workspace, i) is None and all(p.exists() for p in episodes.rendered_videos(workspace, i).values())]


# ----- the loops -------------------------------------------------------------------------------------
def _seed_budget(workspace: Workspace) -> int:
    settings = settings_of(workspace)
    return int(settings.max_attempts_factor * settings.target_count) + 10


def _next_assignment(workspace: Workspace, tried: int, budget: int) -> tuple[int, int]:
    """The next seed and the episode index it would become, from the workspace's records."""
    check_budget(workspace)
    if tried >= budget:
        raise SeedsExhausted(
            f"rollout gave up after {tried} seeds: only {len(episodes.kept_episodes(workspace))} episodes passed "
            f"the hidden judge (target {settings_of(workspace).target_count}); the reasons are in "
            f"{workspace.path(episodes.ATTEMPTS)}: improve the expert, or raise max_attempts_factor")
    kept = episodes.kept_episodes(workspace)
    return episodes.next_seed(workspace), (max(kept) + 1 if kept else 0)


def _log_attempt(workspace: Workspace, attempt: episodes.Attempt) -> None:
    if attempt.accepted:
        log.info("episode %d kept (seed %d): %s", attempt.index, attempt.seed,
                 workspace.path(episodes.episode_dir(attempt.index)), extra=NOTABLE)
    else:
        log.info("seed %d rejected: %s", attempt.seed, attempt.reason)


def _attempt_counts(workspace: Workspace) -> dict:
    done = episodes.attempts(workspace)
    return {"attempted": len(done), "accepted": sum(a.accepted for a in done)}


def seed_search(workspace: Workspace, rollout: Callable[[int, int], episodes.Attempt]) -> dict:
    """Try seeds after the last one tried until enough episodes are kept; each seed is tried once.

    The next seed and the next episode index come from the workspace every time, so a search
    killed between two seeds (or inside one) continues without repeating or skipping an episode.
    """
    budget, tried = _seed_budget(workspace), len(episodes.attempts(workspace))
    while wanted(workspace) > 0:
        attempt = rollout(*_next_assignment(workspace, tried, budget))
        tried += 1
        _log_attempt(workspace, attempt)
    return _attempt_counts(workspace)


def _run_waiting(workspace: Workspace, waiting: list[int], step: Callable[[int], object], report: dict,
                 counter: str) -> bool:
    """Run `step` on each waiting episode, the budget checked before each; whether there was any."""
    for index in waiting:
        check_budget(workspace)
        step(index)
        report[counter] += 1
    return bool(waiting)


def _render_waiting(workspace: Workspace, steps: EpisodeSteps, report: dict) -> bool:
    return _run_waiting(workspace, to_render(workspace), steps.render, report, "rendered")


def _review_waiting(workspace: Workspace, steps: EpisodeSteps, report: dict) -> bool:
    return _run_waiting(workspace, to_review(workspace), steps.review, report, "reviewed")


def _render_and_review_ready(workspace: Workspace, steps: EpisodeSteps, report: dict) -> bool:
    rendered = _render_waiting(workspace, steps, report)
    return _review_waiting(workspace, steps, report) or rendered


def pipelined_round(workspace: Workspace, steps: EpisodeSteps, report: dict) -> None:
    """One round of rollout -> render -> review: the episodes wanted at its start are simulated seed after
    seed as in seed_search, each seed's rollout started before this thread renders and reviews the episodes
    kept so far. A failure waits for the rollout under way, so nothing is left half-written."""
    budget, tried = _seed_budget(workspace), len(episodes.attempts(workspace))
    needed = wanted(workspace)
    while True:
        started = steps.start(*_next_assignment(workspace, tried, budget)) if needed > 0 else None
        try:
            worked = _render_and_review_ready(workspace, steps, report)
        except BaseException:
            if started is not None:
                _finish_quietly(started)
            raise
        if started is None:
            if not worked:
                break
            continue
        attempt = started.result()
        tried += 1
        needed -= attempt.accepted
        _log_attempt(workspace, attempt)
    report["rollout"] = _attempt_counts(workspace)


def _finish_quietly(started: Started) -> None:
    try:
        started.result()
    except Exception:  # the render's or review's failure is the one to report
        log.debug("the rollout under way also failed", exc_info=True)


def collect_episodes(workspace: Workspace, steps: EpisodeSteps, phases: Iterable[str] = EPISODE_PHASES,
                     max_rounds: int = MAX_ROUNDS) -> dict:
    """Rounds of rollout -> render -> review (those of `phases`) until the target is admitted.

    A round simulates what is missing, renders what is not rendered and reviews what is not
    reviewed; episodes the review rejects are topped up by the next round's rollout.
    """
    phases = [p for p in EPISODE_PHASES if p in set(phases)]
    report = {"rounds": 0, "rendered": 0, "reviewed": 0}
    for _ in range(max_rounds if phases else 0):
        report["rounds"] += 1
        if phases == list(EPISODE_PHASES):
            pipelined_round(workspace, steps, report)
            if wanted(workspace) <= 0:
                return report
            continue
        if "rollout" in phases:
            report["rollout"] = seed_search(workspace, steps.rollout)
        if "render" in phases:
            _render_waiting(workspace, steps, report)
        if "review" in phases:
            _review_waiting(workspace, steps, report)
        return report
    settings = settings_of(workspace)
    raise TargetNotReached(
        f"after {max_rounds} rounds the review admitted only {settings.target_count - wanted(workspace)} of "
        f"{settings.target_count} episodes; its reasons are in {workspace.path('episodes')}/*/review.json "
        "(fix the renderer or the scene, then rerun `datafarm farm`)")
