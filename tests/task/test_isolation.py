"""The expert simulates in one sandbox and the judge judges in another: same episodes as in-process,
neither sees the other's code, and a saved trace can be judged on its own (judge_in_sandbox)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from datafarm.library import get_task
from datafarm.task.isolation import IsolatedRollouts, judge_in_sandbox
from datafarm.task.package import load_task_package
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode, simulate_episode

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (make setup)")

# Appended to the apple's judge: a value that says whether the judge could read the expert.
PEEKING_JUDGE = '''

_judge = judge


def judge(trace, params):
    from pathlib import Path
    verdict = _judge(trace, params)
    try:
        seen = "def solve" in (Path(__file__).parent / "expert.py").read_text()
    except OSError:
        seen = False
    return type(verdict)(verdict.checks, {**verdict.values, "expert_visible": float(seen)}, verdict.reason)
'''


class _DoNothing:
    @staticmethod
    def solve(env, skills, params):
        return None


@pytest.fixture(scope="module")
def apple():
    return get_task("apple_on_scale")


@pytest.mark.slow
def test_a_sandboxed_episode_is_the_in_process_episode_and_the_judge_cannot_see_the_expert(apple, tmp_path):
    folder = tmp_path / "pkg"
    shutil.copytree(apple.directory, folder)
    with open(folder / "judge.py", "a") as f:
        f.write(PEEKING_JUDGE)
    package = load_task_package(folder)
    here = run_episode(package, 4)
    with IsolatedRollouts(package, tmp_path / "sandboxes") as rollouts:
        there = rollouts.run(4)
    assert here.success and there.success
    assert np.array_equal(here.trace.qpos, there.trace.qpos) and here.trace.events == there.trace.events
    assert here.verdict.checks == there.verdict.checks
    assert here.verdict.values["reading_kg"] == there.verdict.values["reading_kg"]
    assert here.verdict.values["expert_visible"] == 1.0  # control: in one process the judge can read it
    assert there.verdict.values["expert_visible"] == 0.0


def test_a_saved_trace_is_judged_in_its_own_sandbox(apple, tmp_path):
    accepted = run_episode(apple, 4)
    idle = simulate_episode(apple, 4, expert=_DoNothing())
    accepted.trace.save(tmp_path / "accepted.npz")
    idle.trace.save(tmp_path / "idle.npz")
    verdict = judge_in_sandbox(apple.directory, apple.directory, tmp_path / "accepted.npz", tmp_path / "judge")
    assert verdict == accepted.verdict
    rejected = judge_in_sandbox(apple.directory, apple.directory, tmp_path / "idle.npz", tmp_path / "judge",
                                params=apple.params)
    assert not rejected.success and rejected.checks.keys() == accepted.verdict.checks.keys()


def test_a_broken_judge_gives_a_verdict_with_no_checks(apple, tmp_path):
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "judge.py").write_text("def judge(trace, params):\n    raise ValueError('no verdict')\n")
    run_episode(apple, 4).trace.save(tmp_path / "trace.npz")
    verdict = judge_in_sandbox(tmp_path / "judge", apple.directory, tmp_path / "trace.npz", tmp_path / "w")
    assert not verdict.success and verdict.checks == {} and "ValueError: no verdict" in verdict.reason


@pytest.mark.slow
def test_a_sandboxed_episode_records_its_cameras(apple, tmp_path):
    """Vulkan (lavapipe) renders inside the sandbox: a short do-nothing episode, recorded."""
    from datafarm.sim.recorder import RecordedEpisode

    with IsolatedRollouts(apple, tmp_path / "sandboxes", do_nothing=True) as rollouts:
        result = rollouts.run(0, RandomizationConfig.none(), record_dir=tmp_path / "episode" / "sim")
    assert not result.success and result.error is None  # doing nothing is rejected, and nothing failed
    episode = RecordedEpisode.load(tmp_path / "episode" / "sim")
    rgb, depth = episode.rgb("head"), episode.frames("head")["depth"]
    assert len(rgb) == len(depth) == len(episode.data()["state"]) > 10
    assert rgb.std() > 10 and np.ptp(depth) > 0.1  # a real picture of the scene, not a black frame
    assert not (tmp_path / "sandboxes" / "expert" / "record").exists()  # moved out of the sandbox's folder


def test_workers_are_kept_across_seeds_but_not_across_a_workspace_made_anew(tmp_path):
    """A worker's binds hold the folders it started with: the same package at the same path, deleted
    and copied again (copies keep mtimes), must get fresh workers, or it simulates a deleted scene."""
    from datafarm.task.isolation import close_rollouts, rollouts_for

    source = Path(get_task("apple_on_scale").directory)
    try:
        root = tmp_path / "ws"
        shutil.copytree(source, root / "scene")
        first = rollouts_for(load_task_package(root / "scene"), root / ".sandbox")
        assert rollouts_for(load_task_package(root / "scene"), root / ".sandbox") is first  # kept across seeds
        (root / ".sandbox" / "written-by-an-episode").write_text("x")  # a folder's ctime moves: still kept
        assert rollouts_for(load_task_package(root / "scene"), root / ".sandbox") is first
        shutil.rmtree(root)
        shutil.copytree(source, root / "scene")
        assert rollouts_for(load_task_package(root / "scene"), root / ".sandbox") is not first
    finally:
        close_rollouts()


@pytest.mark.slow
def test_a_sandboxed_rollouts_cpu_is_charged_to_the_block_it_ran_in(apple, tmp_path):
    """The simulation runs in the expert's sandbox, whose CPU never reaches this process's children times
    (bubblewrap does not hand it up, even on a clean exit): the worker's reply must carry it."""
    import os

    from datafarm.costs import CostLedger

    def own_cpu() -> float:
        times = os.times()
        return times.user + times.system

    def charged(phase: str) -> float:
        return sum(e.quantity for e in ledger.entries() if e.phase == phase and e.item == "cpu")

    (tmp_path / "ws").mkdir()
    ledger = CostLedger(tmp_path / "ws")
    children_before = sum(os.times()[2:4])
    rollouts = IsolatedRollouts(apple, tmp_path / "sandboxes", do_nothing=True)
    own_before = own_cpu()
    with ledger.measure_cpu("rollout"):
        rollouts.run(3)
    own_in_block = own_cpu() - own_before
    with ledger.measure_cpu("after"):
        rollouts.close()
    assert charged("rollout") > 1.0 and charged("rollout") > 3 * own_in_block  # the simulation ran in the sandbox
    # control: what the OS hands up for the workers, even after they exit cleanly, is next to nothing
    assert sum(os.times()[2:4]) - children_before < 0.2 * charged("rollout")
    assert charged("after") < 0.5  # closing charges nothing more
