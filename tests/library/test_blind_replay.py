"""The negative control that strike_drum's randomization requires looking: the actions the expert
commanded on one seed, replayed open-loop on new seeds, fail on most of them, while the expert (which
reads where the drum stands) succeeds on every one (benchmarks/expert_success.py measures all tasks)."""

import pytest

from benchmarks.expert_success import blind_replay, recorded_expert_actions
from datafarm.library import get_task
from datafarm.task.rollout import run_episode

SOURCE_SEED = 0
NEW_SEEDS = (1, 2, 3, 4)


@pytest.mark.slow
def test_blind_replay_of_one_episode_fails_where_the_expert_succeeds():
    package = get_task("strike_drum")
    actions, source = recorded_expert_actions(package, SOURCE_SEED)
    assert source.success, source.verdict.reason
    assert actions.shape == (source.steps - round(0.5 * 30), 14)  # the rollout's final 0.5 s hold is not the expert's

    replayed_on_source = blind_replay(package, actions, SOURCE_SEED)
    assert replayed_on_source.success, "replaying the same seed must reproduce the episode"

    expert, judge = package.load_expert(), package.load_judge()
    for seed in NEW_SEEDS:
        result = run_episode(package, seed, expert=expert, judge=judge)
        assert result.success, f"seed {seed}: {result.verdict.reason}; expert error: {result.error}"
    blind = [blind_replay(package, actions, seed).success for seed in NEW_SEEDS]
    assert sum(blind) <= 1, f"blind replay succeeded on {sum(blind)} of {len(NEW_SEEDS)} new seeds"
