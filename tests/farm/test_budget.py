"""The workspace's whole budget (its max_usd setting): once the cost ledger reaches it, no phase, seed,
render or review is started, with exit code 4 and a line that says how to go on; nothing done is lost."""

import time

import pytest

from datafarm.costs import CostLedger
from datafarm.errors import exit_code_of
from datafarm.farm.collect import EpisodeSteps, collect_episodes
from datafarm.farm.runner import WorkspaceBudgetSpent, check_budget, run_phase
from datafarm.workspace import Workspace


@pytest.fixture
def workspace(tmp_path):
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 2, "max_usd": 0.01}})
    workspace.record_phase("prepare", "calibration", [], time.time())
    return workspace


def spend(workspace, usd):
    ledger = CostLedger(workspace.root)
    ledger.add_cpu("rollout", usd / ledger.prices.cpu_second, episode=0)


def test_the_budget_stops_work_only_once_it_is_spent(workspace):
    spend(workspace, 0.009)
    check_budget(workspace)  # under it: go on
    spend(workspace, 0.002)
    with pytest.raises(WorkspaceBudgetSpent, match=r"\$0\.0110 of its \$0\.0100 budget \(max_usd\).*--max-usd") as caught:
        check_budget(workspace)
    assert exit_code_of(caught.value) == 4
    workspace.meta["settings"].pop("max_usd")  # no budget: nothing stops
    check_budget(workspace)


def test_a_spent_budget_starts_no_phase_and_no_episode_work(workspace):
    spend(workspace, 0.02)
    with pytest.raises(WorkspaceBudgetSpent):
        run_phase(workspace, "survey")
    assert workspace.phase_record("survey") is None
    started = []
    steps = EpisodeSteps(rollout=lambda seed, index: started.append(("rollout", seed)),
                         render=lambda index: started.append(("render", index)),
                         review=lambda index: started.append(("review", index)))
    for phases in (("rollout", "render", "review"), ("render",), ("rollout",)):
        workspace.write_json("episodes/000000/result.json", {"seed": 0, "index": 0})
        workspace.write_json("episodes/000000/sim/episode.json", {"fps": 30})  # kept, waiting for its render
        with pytest.raises(WorkspaceBudgetSpent):
            collect_episodes(workspace, steps, phases)
    assert started == []
