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
