"""Near-miss controls: for each built-in task, an expert variant that nearly does the task (the
mistake a careless policy would make) must be rejected by the task's hidden judge."""

import dataclasses

import numpy as np
import pytest

from datafarm.library import get_task
from datafarm.skills import Unreachable, pose
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode


def _near_miss(task: str, expert, seed: int = 0):
    return run_episode(get_task(task), seed, RandomizationConfig.none(), expert=expert)


class WithParams:
    """The task's own expert, run with some of its params changed."""

    def __init__(self, task: str, **changes):
        self.expert, self.changes = get_task(task).load_expert(), changes

    def solve(self, env, skills, params):
        self.expert.solve(env, skills, {**params, **self.changes})


class ConeTippedOver:
    """lift_cone's expert (lifting 9 cm, where the wrist can still turn), then the wrist turns the
    held cone ~25 deg off upright: about the horizontal axis square to the fingers' opening, so the
    pinch line tilts and the cone with it (turned about the pinch line it would swing back)."""

    def solve(self, env, skills, params):
        get_task("lift_cone").load_expert().solve(env, skills, {**params, "lift_height": 0.09})
        side = next(side for side, held in skills.held.items() if held == "cone")
        tcp = skills.tcp(side)
        for angle in (0.55, -0.55, 0.5, -0.5):
            cos, sin = np.cos(angle), np.sin(angle)
            turn = np.array([[1.0, 0.0, 0.0], [0.0, cos, -sin], [0.0, sin, cos]])  # about the TCP's x axis
            try:
                skills.move_to(side, [pose(tcp[:3, 3], tcp[:3, :3] @ turn)], min_duration=1.0)
                break
            except Unreachable:
                continue
        else:
            raise Unreachable("the wrist cannot turn the held cone")
        skills.wait(0.5)


class TeapotByTheKnob:
    """Lifts the teapot by the body: a pinch on the lid's knob (on the body's axis) instead of the handle."""

    def solve(self, env, skills, params):
        teapot = env.object("teapot")
        side = "left" if teapot.center()[0] < 0 else "right"
        # TCP 1.2 cm below the knob's top: the fingertips stop just above the lid.
        skills.grasp(side, "teapot", height=0.107, yaw=None, opening=0.05, approach=0.1)
        skills.lift(side, params["lift_height"])
        skills.wait(0.5)


@pytest.mark.slow
def test_lift_cone_judge_rejects_a_cone_held_tipped_over():
    result = _near_miss("lift_cone", ConeTippedOver())
    assert result.error is None, result.error
    assert result.verdict.checks["lifted"] and result.verdict.checks["in_gripper"], result.verdict.reason
    assert not result.success, f"lift_cone: the judge accepted a tipped-over cone ({result.verdict.reason})"


@pytest.mark.slow
def test_lift_brick_judge_rejects_a_brick_lifted_too_little():
    result = _near_miss("lift_brick", WithParams("lift_brick", lift_height=0.05))
    assert result.verdict.checks["in_gripper"] and result.verdict.checks["held_still"], result.verdict.reason
    assert not result.success, f"lift_brick: the judge accepted a 5 cm lift ({result.verdict.reason})"


@pytest.mark.slow
def test_lift_teapot_judge_rejects_a_teapot_lifted_by_the_body():
    result = _near_miss("lift_teapot", TeapotByTheKnob())
    assert result.error is None, result.error
    assert result.verdict.checks["lifted"], result.verdict.reason
    assert not result.success, f"lift_teapot: the judge accepted a lift by the knob ({result.verdict.reason})"


class ScrewOnTheRim:
    """screw_in_basket's expert, but the screw goes down across the end wall on its arm's side, its
    balance point 1 cm outside the wall's middle, and is let go 1 cm above the rim: dropped onto
    the rim, it tips off it (a 5 mm rim holds no screw) and lands beside the basket."""

    def __init__(self):
        self.expert = get_task("screw_in_basket").load_expert()
        goals = self.expert.screw_goals

        def across_the_wall(basket, height, params):
            for goal in goals(basket, height, params):
                if abs(basket.pose()[:3, 0] @ goal[:3, 0]) > 0.9:  # the shaft along the basket's x
                    yield goal

        self.expert.screw_goals = across_the_wall

    def solve(self, env, skills, params):
        basket = env.object("basket")
        start = np.linalg.inv(basket.pose()) @ [*env.object("screw").pose()[:3, 3], 1.0]
        outside = np.sign(start[0]) * (params["inner_half"][0] + 0.0025 + 0.01)  # wall middle + 1 cm
        self.expert.drop_point = lambda basket: (basket.pose() @ [outside, 0.0, 0.0, 1.0])[:2]
        release_height = params["rim_height"] - params["floor"] + 0.01
        self.expert.solve(env, skills, {**params, "release_height": release_height})


class NutBesideThePlate:
    """nut_on_plate's expert, setting the nut down at `reach` x the plate's radius from its centre
    (towards where the nut started): on the table next to it (1.4), or half over its edge (1.0)."""

    def __init__(self, reach: float):
        self.expert, self.reach = get_task("nut_on_plate").load_expert(), reach

    def solve(self, env, skills, params):
        plate, start = env.object("plate"), env.object("nut").pose()[:3, 3]
        centre = self.expert.plate_target(env, params)
        towards_nut = (start - centre)[:2] / np.linalg.norm((start - centre)[:2])
        target = centre + [*(self.reach * params["plate_radius"] * towards_nut), 0.0]
        if self.reach > 1.2:  # off the plate: onto the table
            target[2] = plate.pose()[2, 3]
        self.expert.plate_target = lambda env, params: target
        self.expert.solve(env, skills, params)


class BowlOnTheRim:
    """stack_bowls' expert, letting the small bowl go with its centre over the big bowl's rim (towards
    the pinch) and its bottom 1 cm above it: it comes to rest leaning on the rim."""

    def __init__(self):
        self.expert = get_task("stack_bowls").load_expert()

    def solve(self, env, skills, params):
        from unittest import mock

        from datafarm.skills import nesting

        def over_the_rim(env, skills, side, held, receiver, vessels, params):
            rim = nesting._rim_centre(env.object(receiver))
            towards_pinch = skills.tcp(side)[:2, 3] - env.object(held).pose()[:2, 3]
            towards_pinch /= np.linalg.norm(towards_pinch)
            return rim + [*(params["radii"][receiver] * towards_pinch), 0.01]

        with mock.patch.object(nesting, "_release_point", over_the_rim):
            self.expert.solve(env, skills, params)


@pytest.mark.slow
def test_pick_screw_judge_rejects_a_screw_lifted_too_little():
    result = _near_miss("pick_screw", WithParams("pick_screw", lift_height=0.04))
    assert result.error is None, result.error
    assert result.verdict.checks["held"], result.verdict.reason
    assert not result.success, f"pick_screw: the judge accepted a 4 cm lift ({result.verdict.reason})"


@pytest.mark.slow
def test_screw_in_basket_judge_rejects_the_screw_dropped_onto_the_rim():
    result = _near_miss("screw_in_basket", ScrewOnTheRim())
    assert result.error is None, result.error
    assert result.verdict.checks["released"] and not result.verdict.checks["inside_walls"], result.verdict.reason
    assert not result.success, f"screw_in_basket: the judge accepted a screw dropped on the rim ({result.verdict.reason})"


@pytest.mark.slow
def test_screw_in_basket_judge_rejects_a_screw_lying_on_the_rim():
    """The solved episode's trace, with the screw moved for the final second onto the top of a side
    wall, lying along it (a state a wider rim could hold): on the rim, not below it."""
    package = get_task("screw_in_basket")
    solved = run_episode(package, 0, RandomizationConfig.none())
    assert solved.success, solved.verdict.reason
    params, trace = package.params, solved.trace
    on_rim = np.eye(4)
    on_rim[:3, 3] = [0.0, params["inner_half"][1] + 0.0025, params["rim_height"]]  # along the side wall's top
    poses = trace.poses["screw"].copy()
    final = trace.last(1.0)
    poses[final] = trace.poses["basket"][final] @ on_rim
    verdict = package.load_judge().judge(dataclasses.replace(trace, poses={**trace.poses, "screw": poses}), params)
    assert not verdict.checks["below_rim"] and not verdict.success, verdict.reason


@pytest.mark.slow
@pytest.mark.parametrize("reach", [1.4, 1.0], ids=["beside", "on_the_edge"])
def test_nut_on_plate_judge_rejects_the_nut_beside_the_plate_or_on_its_edge(reach):
    result = _near_miss("nut_on_plate", NutBesideThePlate(reach))
    assert result.error is None, result.error
    assert result.verdict.checks["released"], result.verdict.reason
    assert not result.success, f"nut_on_plate: the judge accepted the nut at {reach} radii ({result.verdict.reason})"


@pytest.mark.slow
def test_stack_bowls_judge_rejects_a_bowl_leaning_on_the_rim():
    result = _near_miss("stack_bowls", BowlOnTheRim())
    assert result.error is None, result.error
    assert result.verdict.checks["released"], result.verdict.reason
    assert not result.success, f"stack_bowls: the judge accepted a bowl on the rim ({result.verdict.reason})"
