"""One test over the whole registry of built-in tasks: builds, settles, solves, judges, and the
judge rejects the negative controls (a do-nothing rollout and one that stops halfway)."""

import numpy as np
import pytest

from datafarm.library import BUILTIN_TASKS, get_task
from datafarm.scene.settle import settle_check
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode

SEEDS = (0, 1)


class DoNothing:
    @staticmethod
    def solve(env, skills, params):
        return None


class StopHalfway:
    """The real expert, cut off after half the steps the full episode took."""

    def __init__(self, expert, steps):
        self.expert, self.steps = expert, steps

    def solve(self, env, skills, params):
        env.max_steps = self.steps // 2
        self.expert.solve(env, skills, params)


@pytest.fixture(scope="module", params=sorted(BUILTIN_TASKS))
def package(request):
    return get_task(request.param)


def test_scene_builds_and_settles(package):
    report = settle_check(package, seed=0)
    assert report.ok, report.message


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_expert_solves_and_judge_accepts(package, seed):
    result = run_episode(package, seed, RandomizationConfig())
    assert result.success, f"{package.name} seed {seed}: {result.verdict.reason}; expert error: {result.error}"


def test_judge_rejects_the_do_nothing_rollout(package):
    result = run_episode(package, 0, RandomizationConfig.none(), expert=DoNothing())
    assert not result.success, f"{package.name}: the judge accepted doing nothing ({result.verdict.reason})"


@pytest.mark.slow
def test_judge_rejects_a_rollout_that_stops_halfway(package):
    full = run_episode(package, 0, RandomizationConfig.none())
    assert full.success, full.verdict.reason
    half = run_episode(package, 0, RandomizationConfig.none(), expert=StopHalfway(package.load_expert(), full.steps))
    assert not half.success, f"{package.name}: the judge accepted a half-done episode ({half.verdict.reason})"
    assert np.isclose(half.sim_seconds, full.steps // 2 / 30, atol=0.1)
