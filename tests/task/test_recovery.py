"""Recovery episodes: the arm pushed off its path, the object taken away at the grasp; the expert recovers,
and only the continuation is its demonstration (datafarm.task.recovery)."""

import dataclasses
import json

import numpy as np
import pytest

from datafarm.library import get_task
from datafarm.task.isolation import IsolatedRollouts
from datafarm.task.randomization import RandomizationConfig, sample_episode
from datafarm.task.rollout import run_episode

RECOVERY = RandomizationConfig(recovery_fraction=1.0)


def with_recovery(package, kinds):
    return dataclasses.replace(package, info=package.info.model_copy(update={"recovery": kinds}))


@pytest.fixture(scope="module")
def apple():
    return get_task("apple_on_scale")


class SwallowsEverything:
    """The apple expert wrapped the way careless agent code is: `except Exception: pass`."""

    def __init__(self, expert):
        self.expert = expert

    def solve(self, env, skills, params):
        try:
            self.expert.solve(env, skills, params)
        except Exception:
            pass


def first_disturbed_seed(package, kind, seeds=range(40)):
    spec, info = package.scene, package.info
    for seed in seeds:
        sample = sample_episode(spec, seed, RECOVERY, info.max_seconds, 30, info.recovery)
        if sample.disturbance and sample.disturbance.kind == kind:
            return seed
    raise AssertionError(f"no {kind} among seeds {seeds}")


def test_recovery_draws_change_no_other_draw_and_follow_the_tasks_kinds(apple):
    plain = sample_episode(apple.scene, 3, RandomizationConfig(), 30, 30, ["push", "misgrasp"])
    recovering = sample_episode(apple.scene, 3, RECOVERY, 30, 30, ["push", "misgrasp"])
    assert plain.disturbance is None and recovering.disturbance is not None
    assert {**plain.to_dict(), "disturbance": None} == {**recovering.to_dict(), "disturbance": None}
    assert sample_episode(apple.scene, 3, RECOVERY, 30, 30, []).disturbance is None  # the task declares none
    kinds = {sample_episode(apple.scene, s, RECOVERY, 30, 30, ["push"]).disturbance.kind for s in range(10)}
    assert kinds == {"push"}
    share = np.mean([sample_episode(apple.scene, s, RandomizationConfig(recovery_fraction=0.3), 30, 30, ["push"])
                     .disturbance is not None for s in range(200)])
    assert 0.2 < share < 0.4


def test_a_pushed_arm_moves_through_the_physics_and_the_expert_recovers(apple):
    package = with_recovery(apple, ["push"])
    seed = first_disturbed_seed(package, "push")
    result = run_episode(package, seed, RECOVERY, expert=SwallowsEverything(package.load_expert()))
    recovery = result.recovery
    assert recovery and recovery["kind"] == "push", result.trace.events
    assert recovery["distance_m"] > 0.03
    assert result.success, result.verdict.reason
    # a shove, not a teleport: the pushed TCP never jumps between control steps
    side = ["left", "right"].index(recovery["side"])
    steps = np.linalg.norm(np.diff(result.trace.tcp[:, side], axis=0), axis=1)
    assert steps.max() < 0.03
    assert recovery["at_step"] < recovery["demonstration_start"] < result.steps


def test_a_misgrasped_object_is_found_again_and_regrasped(apple):
    package = with_recovery(apple, ["misgrasp"])
    seeds = [s for s in range(40) if (d := sample_episode(package.scene, s, RECOVERY, 30, 30, ["misgrasp"]).disturbance)
             and d.kind == "misgrasp"][:3]
    results = [run_episode(package, seed, RECOVERY) for seed in seeds]
    for result in results:
        recovery = result.recovery
        assert recovery and recovery["kind"] == "misgrasp" and recovery["object"] == "apple"
        assert recovery["distance_m"] >= 0.04
        apple_xy = result.trace.center("apple")[recovery["demonstration_start"] + 1, :2]
        assert np.allclose(apple_xy, recovery["to_xy"], atol=0.01)  # where the person set it down
    # the expert recovers from most (benchmarks/recovery_success.py measures how many)
    assert sum(r.success for r in results) >= 2, [r.verdict.reason for r in results]


def test_without_recovery_the_episode_is_the_plain_one(apple):
    package = with_recovery(apple, ["push", "misgrasp"])
    plain = run_episode(apple, 1, RandomizationConfig())
    declared_but_off = run_episode(package, 1, RandomizationConfig())
    assert declared_but_off.recovery is None
    assert np.array_equal(plain.trace.qpos, declared_but_off.trace.qpos)


@pytest.mark.slow
def test_a_sandboxed_recovery_episode_is_recorded_and_harvested_from_its_continuation(apple, tmp_path):
    from datafarm.dataset.harvest import MANIFEST_NAME, HarvestItem, harvest
    from datafarm.sim.recorder import RecordedEpisode

    assert "misgrasp" in apple.info.recovery  # task.yaml's, which the sandboxed worker reads too
    seed = next(s for s in range(40) if (d := sample_episode(apple.scene, s, RECOVERY, 30, 30, apple.info.recovery)
                                         .disturbance) and d.kind == "misgrasp" and run_episode(apple, s, RECOVERY).success)
    with IsolatedRollouts(apple, tmp_path / "sandboxes") as rollouts:
        result = rollouts.run(seed, RECOVERY, record_dir=tmp_path / "episode")
    assert result.success and result.recovery and result.recovery["kind"] == "misgrasp", result.error
    assert result.recovery == run_episode(apple, seed, RECOVERY).recovery  # the same episode as in process
    recorded = RecordedEpisode.load(tmp_path / "episode")
    start = recorded.meta["recovery"]["demonstration_start"]
    state = recorded.data()["state"]

    report = harvest([HarvestItem(tmp_path / "episode", index=0)], tmp_path / "dataset", "test/recovery", 30, "weigh it")
    info = json.loads((tmp_path / "dataset" / "meta" / "info.json").read_text())
    assert report.frames == info["total_frames"] == len(state) - start
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    first = LeRobotDataset("test/recovery", root=tmp_path / "dataset")[0]
    assert np.allclose(first["observation.state"].numpy(), state[start], atol=1e-6)
    manifest = json.loads((tmp_path / "dataset" / MANIFEST_NAME).read_text())
    assert manifest["episodes"][0]["recovery"]["kind"] == "misgrasp"
