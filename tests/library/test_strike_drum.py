"""strike_drum: the judge counts distinct impacts, not contact time; the drum measures the hits."""

import numpy as np
import pytest

from datafarm.library import get_task
from datafarm.skills import pose, top_down
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode

DT = 1 / 30


@pytest.fixture(scope="module")
def package():
    return get_task("strike_drum")


@pytest.fixture(scope="module")
def judge_module(package):
    return package.load_judge()


def _onsets(judge_module, package, impulse):
    params = package.params
    impulse = np.asarray(impulse, dtype=float)
    time = np.arange(len(impulse)) * DT
    return judge_module.impact_onsets(time, impulse, impulse > 0, params["impulse_threshold"],
                                      params["min_gap_seconds"])


def test_a_long_press_is_one_impact(judge_module, package):
    assert len(_onsets(judge_module, package, [0] * 5 + [5.0] * 90 + [0] * 5)) == 1


def test_hits_without_a_gap_between_them_are_one_impact(judge_module, package):
    # Two pulses 2 control steps (67 ms) apart: the gripper never really left the head.
    assert len(_onsets(judge_module, package, [0] * 5 + [5.0] * 3 + [0] * 2 + [5.0] * 3 + [0] * 5)) == 1


def test_separate_hits_count_and_grazes_do_not(judge_module, package):
    hit, rest, graze = [5.0] * 3, [0.0] * 10, [0.001] * 3
    assert len(_onsets(judge_module, package, rest + hit + rest + graze + rest + hit + rest)) == 2


class RestOnHead:
    """Lower the closed right gripper onto the drum head and leave it resting there."""

    @staticmethod
    def solve(env, skills, params):
        head = env.fixture("drum").head_center() + [0, 0, params["fingertip_reach"]]
        lean = skills.outward_yaw("right", head)
        above = [pose(head + [0, 0, 0.08], top_down(yaw, tilt, lean)) for tilt in (0.3, 0.5) for yaw in (0.0, np.pi)]
        skills.move_to("right", above, gripper=0.0)
        rotation = skills.tcp("right")[:3, :3]
        skills.move_linear("right", pose(head - [0, 0, 0.005], rotation), speed=0.5)
        skills.wait(3.0)


@pytest.mark.slow
def test_resting_on_the_head_is_not_two_strikes(package):
    result = run_episode(package, 0, RandomizationConfig.none(), expert=RestOnHead())
    assert result.error is None, result.error
    impulse = result.trace.fixture("drum", "impulse")
    assert (impulse > package.params["impulse_threshold"]).sum() > 60  # pressing for seconds
    assert result.verdict.values["impacts"] == 1
    assert not result.success
