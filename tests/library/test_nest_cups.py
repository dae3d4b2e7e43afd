"""nest_cups specifics: the judge's sizes match the scene, and nesting only the first cup fails."""

import pytest

from datafarm.library import get_task
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode


@pytest.fixture(scope="module")
def package():
    return get_task("nest_cups")


def test_judge_sizes_match_the_scene(package):
    params = package.params
    for name in params["cups"]:
        geometry = package.scene.item(name).geometry
        assert geometry.radius == params["radii"][name], name
        assert geometry.wall == params["wall"], name
        assert package.scene.item(name).randomize.scale == (1.0, 1.0), f"{name}: sizes must not be randomized"
    # each cup fits inside the one before it
    for outer, inner in zip(params["cups"], params["cups"][1:]):
        assert params["radii"][inner] < params["radii"][outer] - params["wall"]


class FirstNestingOnly:
    """The real expert, told about the two outer cups only: the medium cup goes into the big one."""

    def __init__(self, expert):
        self.expert = expert

    def solve(self, env, skills, params):
        self.expert.solve(env, skills, {**params, "cups": params["cups"][:2]})


@pytest.mark.slow
def test_judge_rejects_only_the_first_nesting(package):
    result = run_episode(package, 0, RandomizationConfig.none(), expert=FirstNestingOnly(package.load_expert()))
    assert result.error is None, result.error
    assert result.verdict.checks["medium_cup_in_big_cup"], result.verdict.reason
    assert not result.success, f"the judge accepted two of three cups nested ({result.verdict.reason})"
