"""rollout -> render -> review until the target is admitted: the seed search and the top-up rounds.

Plain functions on a workspace. What handles ONE episode in each phase is passed in as
`EpisodeSteps`: the flows pass their Prefect tasks, everything else `library_steps` (the same library
calls, no Prefect). What is done is read from the workspace every time (episodes/NNNNNN/ and
rollout/attempts.jsonl), so a killed run resumes where it stopped and nothing else is remembered.

A round of all three phases is pipelined: while seeds are simulated (each in its own sandboxed worker
process, up to the `rollout_workers` setting at once, started through `EpisodeSteps.rollout`: Prefect
tasks submitted to the flow's task runner), this thread renders the episodes already kept and starts
each one's review in a thread of that runner, where it runs beside the next render, so every core works (on
a Dask or Ray cluster, renders and reviews go to the cluster's processes too, `at_once` at a time). A seed
simulates into its own staging folder; this thread alone commits them, in seed order, as the next episode
indices: the episodes (and the ledger) are those one worker would make.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections import deque
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
from datafarm.workspace.workspace import this_process

log = logging.getLogger(__name__)

EPISODE_PHASES = ("rollout", "render", "review")
MAX_ROUNDS = 4  # rollout -> render -> review rounds, topping up the episodes the review rejected


class SeedsExhausted(PermanentError):
    """The expert passed the hidden judge too rarely to reach the target within the seed budget."""


class TargetNotReached(PermanentError):
    """The review kept rejecting episodes: the target was not admitted within the rounds allowed."""


# ----- one episode per phase (what a Prefect task wraps) ---------------------------------------------
def rollout_one(workspace: Workspace, seed: int, slot: int | None = 0) -> episodes.Staged:
    """Simulate `seed` in sandbox slot `slot` (None: this process's own) into its staging folder; its cost is
    charged at the commit."""
    from datafarm.costs import cpu_seconds
    from datafarm.farm.authoring import workspace_package

    package = workspace_package(workspace)
    # the simulation's CPU comes in the sandbox's replies; this thread's own is the rest (it may run beside a render)
    cpu_before, started = cpu_seconds(thread_only=True), time.perf_counter()
    staged = episodes.rollout_seed(workspace, package, seed, slot)
    return dataclasses.replace(staged, cpu_seconds=cpu_seconds(thread_only=True) - cpu_before,
                               wall_seconds=time.perf_counter() - started, ended=time.time(), process=this_process())


def render_one(workspace: Workspace, index: int) -> dict[str, Path]:
    from datafarm.render import get_renderer

    settings = settings_of(workspace)
    renderer = get_renderer(settings.renderer, **settings.renderer_options())
    references = episodes.calibration_references(workspace)
    # this thread's CPU alone: the review of the episode before may run beside it, in another thread
    with accounted(workspace, "render", index, thread_only=True):
        videos = episodes.render_episode(workspace, index, renderer, references, episodes.texture_pool())
    log.info("episode %d rendered: %s", index, workspace.path(episodes.episode_dir(index), "render"))
    return videos


def review_one(workspace: Workspace, index: int) -> dict:
    with accounted(workspace, "review", index, thread_only=True):  # beside the next render
        review = episodes.review_episode(workspace, index)
    verdict = "admitted" if review["admitted"] else f"rejected ({'; '.join(review.get('reasons', []))})"
    log.info("episode %d %s: %s", index, verdict, workspace.path(episodes.episode_dir(index), "review.json"),
             extra=NOTABLE)
    return review


class Started(Protocol):
    """One episode's step under way (a Prefect future, or one already finished)."""

    def result(self) -> object: ...


@dataclass(frozen=True)
class Finished:
    value: object

    def result(self) -> object:
        return self.value


@dataclass(frozen=True)
class EpisodeSteps:
    """What handles one episode in each phase. Each returns its step under way; result() gives the staged
    rollout, the videos or the review."""
    rollout: Callable[[int, int], Started]  # (seed, sandbox slot)
    render: Callable[[int], Started]  # episode index
    review: Callable[[int], Started]  # episode index
    # renders (or reviews) under way at once: 1 where renders run in this thread and reviews in one thread
    # beside it, a cluster's worker count where they are submitted to its processes
    at_once: int = 1


def library_steps(workspace: Workspace) -> EpisodeSteps:
    """No Prefect: each step runs at once, in this thread."""
    return EpisodeSteps(rollout=lambda seed, slot: Finished(rollout_one(workspace, seed, slot)),
                        render=lambda index: Finished(render_one(workspace, index)),
                        review=lambda index: Finished(review_one(workspace, index)))


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


def _log_attempt(workspace: Workspace, attempt: episodes.Attempt) -> None:
    if attempt.accepted:
        log.info("episode %d kept (seed %d): %s", attempt.index, attempt.seed,
                 workspace.path(episodes.episode_dir(attempt.index)), extra=NOTABLE)
    else:
        log.info("seed %d rejected: %s", attempt.seed, attempt.reason)


def _attempt_counts(workspace: Workspace) -> dict:
    done = episodes.attempts(workspace)
    return {"attempted": len(done), "accepted": sum(a.accepted for a in done)}


def simulate_seeds(workspace: Workspace, steps: EpisodeSteps, between: Callable[[], bool] = lambda: False) -> dict:
    """Simulate the seeds after the last one tried until enough episodes are kept; each seed is tried once.

    Up to `rollout_workers` seeds simulate at once, in sandbox slots of their own (seed modulo the workers:
    the seeds under way are consecutive), never more than are still wanted. `between()` runs while they do
    (the render and review of a pipelined round; whether it did any work). The oldest seed is committed
    first, so the episode indices follow the seeds whatever finishes first. The next seed and index come
    from the workspace's records, so a run killed anywhere continues without repeating or skipping an
    episode: an uncommitted seed was never tried.
    """
    episodes.clear_staging(workspace)
    workers = settings_of(workspace).rollout_workers
    budget, tried, needed = _seed_budget(workspace), len(episodes.attempts(workspace)), wanted(workspace)
    seeds = itertools.count(episodes.next_seed(workspace))
    under_way: deque[Started] = deque()  # the oldest seed first
    try:
        while True:
            while len(under_way) < min(workers, needed) and tried + len(under_way) < budget:
                check_budget(workspace)
                seed = next(seeds)
                under_way.append(steps.rollout(seed, seed % workers))
            worked = between()
            if not under_way:
                if needed > 0:
                    raise SeedsExhausted(
                        f"rollout gave up after {tried} seeds: only {len(episodes.kept_episodes(workspace))} "
                        f"episodes passed the hidden judge (target {settings_of(workspace).target_count}); the "
                        f"reasons are in {workspace.path(episodes.ATTEMPTS)}: improve the expert, or raise "
                        "max_attempts_factor")
                if not worked:
                    break
                continue
            attempt = episodes.commit_rollout(workspace, under_way[0].result(), episodes.next_index(workspace))
            under_way.popleft()
            tried += 1
            needed -= attempt.accepted
            _log_attempt(workspace, attempt)
    except BaseException:
        for started in under_way:  # nothing is left half-written: wait for the simulations under way
            _finish_quietly(started)
        raise
    return _attempt_counts(workspace)


def _run_waiting(workspace: Workspace, waiting: list[int], step: Callable[[int], Started], at_once: int,
                 report: dict, counter: str) -> bool:
    """Run `step` on each waiting episode, up to `at_once` under way, the budget checked before each start;
    whether there was any. On a failure the others under way are waited for, then it is raised."""
    under_way: deque[Started] = deque()

    def finish_oldest() -> None:
        under_way[0].result()
        under_way.popleft()
        report[counter] += 1

    try:
        for index in waiting:
            if len(under_way) >= at_once:
                finish_oldest()
            check_budget(workspace)
            under_way.append(step(index))
        while under_way:
            finish_oldest()
    except BaseException:
        for started in under_way:
            _finish_quietly(started)
        raise
    return bool(waiting)


def _render_waiting(workspace: Workspace, steps: EpisodeSteps, report: dict) -> bool:
    return _run_waiting(workspace, to_render(workspace), steps.render, steps.at_once, report, "rendered")


def _review_waiting(workspace: Workspace, steps: EpisodeSteps, report: dict) -> bool:
    return _run_waiting(workspace, to_review(workspace), steps.review, steps.at_once, report, "reviewed")


class _RenderThenReview:
    """`between()` of a pipelined round: render each kept episode (waiting for it), then start its review
    and leave it running, so an episode's review runs while the next one renders and the rollouts simulate.
    Up to `steps.at_once` reviews are under way; with nothing else to do, it waits for the oldest."""

    def __init__(self, workspace: Workspace, steps: EpisodeSteps, report: dict):
        self.workspace, self.steps, self.report = workspace, steps, report
        self.reviews: deque[tuple[int, Started]] = deque()  # (episode index, its review), the oldest first

    def __call__(self) -> bool:
        """Whether there was any work: a render, a review started, or one waited for."""
        rendered = _render_waiting(self.workspace, self.steps, self.report)
        under_way = {index for index, _ in self.reviews}
        waiting = [index for index in to_review(self.workspace) if index not in under_way]
        for index in waiting:
            while len(self.reviews) >= self.steps.at_once:
                self._finish_oldest()
            check_budget(self.workspace)
            self.reviews.append((index, self.steps.review(index)))
        if rendered or waiting:
            return True
        if self.reviews:
            self._finish_oldest()
            return True
        return False

    def _finish_oldest(self) -> None:
        self.reviews[0][1].result()
        self.reviews.popleft()
        self.report["reviewed"] += 1

    def wait_quietly(self) -> None:
        """After a failure: let the reviews under way finish, so none is left half-written."""
        for _, started in self.reviews:
            _finish_quietly(started)


def _finish_quietly(started: Started) -> None:
    try:
        started.result()
    except Exception:  # the first failure is the one to report
        log.debug("a rollout under way also failed", exc_info=True)


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
            render_then_review = _RenderThenReview(workspace, steps, report)
            try:
                report["rollout"] = simulate_seeds(workspace, steps, between=render_then_review)
            except BaseException:
                render_then_review.wait_quietly()
                raise
            if wanted(workspace) <= 0:
                return report
            continue
        if "rollout" in phases:
            report["rollout"] = simulate_seeds(workspace, steps)
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
