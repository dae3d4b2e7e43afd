"""The workspace's own records are the one resume mechanism: a farm from scratch at a path that was
farmed before starts from scratch, and a farm killed mid-rollout resumes without losing or
duplicating an episode."""

import shutil

import pytest

from datafarm.farm.episodes import attempts, kept_episodes
from datafarm.farm.prepare import prepare
from datafarm.farm.settings import FarmSettings
from datafarm.workspace import Workspace

pytestmark = pytest.mark.slow


def test_a_second_farm_from_scratch_at_the_same_path_succeeds(prefect_harness, synthetic_calibration, tmp_path):
    """Defect 1: a Prefect result cache (in Prefect's home, keyed by path and seed) answered the
    second run's rollouts with the first run's results, whose files had been deleted."""
    from flows.farm import farm_flow

    root = tmp_path / "ws"
    settings = FarmSettings(target_count=2, expert_trial_seeds=3)
    for run in range(2):
        prepare(synthetic_calibration, "Put the apple on the scale.", root, settings)
        farm_flow(str(root), until="rollout")
        workspace = Workspace.open(root)
        assert len(kept_episodes(workspace)) == 2, f"run {run}: {attempts(workspace)}"
        assert all(workspace.path(f"episodes/{i:06d}/sim/episode.json").exists() for i in (0, 1))
        shutil.rmtree(root)  # as `rm -rf` would


class _Killed(BaseException):
    """Stands in for SIGKILL: nothing after the raise runs, no `except Exception` catches it."""


def test_a_farm_killed_mid_rollout_resumes_without_losing_or_duplicating_episodes(farmed_workspace, tmp_path):
    """Kill the rollout while the second of 2 episodes is staged, and as if the kill also cut off the first
    episode's line in the attempts log; the resumed farm (library loop, then the flows) delivers both, once
    each."""
    import dataclasses

    from datafarm.farm.collect import Finished, collect_episodes, library_steps, rollout_one, simulate_seeds
    from datafarm.farm.episodes import STAGING
    from datafarm.farm.deliver import verify
    from flows.farm import farm_flow

    root = tmp_path / "ws"
    shutil.copytree(farmed_workspace, root)
    for done in ("episodes", "rollout", "dataset", "manifest.json"):  # keep authoring, redo the episodes
        shutil.rmtree(root / done) if (root / done).is_dir() else (root / done).unlink()
    workspace = Workspace.open(root)
    staged = []

    def rollout_then_killed(seed, slot):
        staged.append(rollout_one(workspace, seed, slot))
        if sum(s.accepted for s in staged) == 2:  # simulated and staged, not yet committed
            raise _Killed
        return Finished(staged[-1])

    with pytest.raises(_Killed):
        simulate_seeds(workspace, dataclasses.replace(library_steps(workspace), rollout=rollout_then_killed))
    assert kept_episodes(workspace) == [0]
    first_seed = workspace.read_json("episodes/000000/result.json")["seed"]
    killed_seed = staged[-1].seed
    assert [p.name for p in workspace.path(STAGING).iterdir()] == [str(killed_seed)]
    lines = workspace.path("rollout/attempts.jsonl").read_text().splitlines(keepends=True)
    workspace.path("rollout/attempts.jsonl").write_text("".join(lines[:-1]))  # the kept episode's line, lost

    collect_episodes(workspace, library_steps(workspace))  # resume without Prefect
    assert farm_flow(str(root)).ok  # and the flows finish the delivery
    seeds = [workspace.read_json(f"episodes/{i:06d}/result.json")["seed"] for i in kept_episodes(workspace)]
    assert seeds == [first_seed, killed_seed]  # the staged seed was never tried: it ran again, as episode 1
    tried = [a.seed for a in attempts(workspace)]
    assert len(tried) == len(set(tried)) and first_seed not in tried  # no seed ran twice
    assert verify(Workspace.open(root)).ok  # fresh: harvest rewrote workspace.json
