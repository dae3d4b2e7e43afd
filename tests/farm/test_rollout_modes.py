"""A passing seed costs one simulation: it is recorded with cameras in the simulation the judge sees. Only
while most recent seeds fail does a physics-only search come first; a seed records the same episode
either way, and a rejected seed leaves no episode behind."""

import shutil

import numpy as np
import pytest

from datafarm.farm.collect import rollout_one
from datafarm.farm.episodes import (ATTEMPTS, RECENT_ATTEMPTS, attempts, commit_rollout, episode_dir, kept_episodes,
                                    search_first, staging_dir)
from datafarm.workspace import Workspace
from datafarm.workspace.jsonl import append_jsonl


def log_attempts(workspace, *accepted):
    for seed, ok in enumerate(accepted):
        append_jsonl(workspace.path(ATTEMPTS), {"seed": seed, "accepted": ok, "reason": "" if ok else "missed"})


def test_the_search_comes_first_only_while_most_recent_seeds_fail(tmp_path):
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 3}})
    assert not search_first(workspace)  # nothing tried yet: expect the expert to pass
    log_attempts(workspace, *[False] * 20, *[True] * 5, *[False] * 5)  # old failures do not count; half pass
    assert not search_first(workspace)
    log_attempts(workspace, False)
    assert search_first(workspace)


@pytest.mark.slow
def test_a_seed_records_the_same_episode_either_way_and_a_rejected_seed_leaves_nothing(farmed_workspace, tmp_path):
    root = tmp_path / "ws"
    shutil.copytree(farmed_workspace, root)
    seed = Workspace.open(root).read_json("episodes/000000/result.json")["seed"]
    for done in ("episodes", "rollout", "dataset", "manifest.json"):
        shutil.rmtree(root / done) if (root / done).is_dir() else (root / done).unlink()
    workspace = Workspace.open(root)

    def rollout(seed, index):
        return commit_rollout(workspace, rollout_one(workspace, seed), index)

    assert rollout(seed, 0).accepted  # recorded directly
    log_attempts(workspace, *[False] * RECENT_ATTEMPTS)
    assert search_first(workspace)
    assert rollout(seed, 1).accepted  # searched, then recorded
    direct, searched = (np.load(workspace.path(episode_dir(i), "sim", "data.npz")) for i in (0, 1))
    assert direct.files == searched.files
    for name in direct.files:
        np.testing.assert_array_equal(direct[name], searched[name], err_msg=name)

    # the expert swapped for one that does nothing: the judge rejects the seed in either mode
    workspace.path("expert", "expert.py").write_text("def solve(env, skills, params):\n    pass\n")
    for index, first in ((2, True), (3, False)):
        if not first:
            log_attempts(workspace, *[True] * RECENT_ATTEMPTS)
        assert search_first(workspace) is first
        rejected = rollout(seed, index)
        assert not rejected.accepted and rejected.reason
        assert not workspace.path(episode_dir(index)).exists() and not staging_dir(workspace, seed).exists()
    assert kept_episodes(workspace) == [0, 1]
    assert [a.accepted for a in attempts(workspace)][-1] is False
