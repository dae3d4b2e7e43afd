"""kill -9 the farm mid-run and resume it: nothing lost, nothing duplicated, verified, and the same
actions and states frame by frame as a run that was never killed (the lean version of the campaign in
`benchmarks/reliability.py`: 2 episodes, 2 kills)."""

import shutil

import pytest
from campaign import compare_datasets, kill_plan, kill_resume_campaign, reset_to_episodes

pytestmark = pytest.mark.slow


def test_a_farm_killed_twice_delivers_what_an_unkilled_one_does(farmed_workspace, tmp_path):
    workspace = tmp_path / "ws"
    shutil.copytree(farmed_workspace, workspace)
    reset_to_episodes(workspace)  # the expert stays: the kills land in the per-episode phases and harvest
    assert not (workspace / "episodes").exists() and not (workspace / "manifest.json").exists()
    result = kill_resume_campaign(workspace, farmed_workspace, kills=2, seed=3)
    landed = [k for k in result.kills if k.stage not in ("finished", "timeout")]
    assert len(landed) >= 1, result.kills
    assert result.passed, result


def test_the_comparison_sees_a_changed_action(farmed_workspace, tmp_path):
    """The negative control of the frame-by-frame comparison."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "ws"
    shutil.copytree(farmed_workspace, copy)
    assert compare_datasets(copy, farmed_workspace)[1] == 0
    file = next((copy / "dataset" / "data").rglob("*.parquet"))
    table = pq.read_table(file)
    actions = table.column("action").to_pylist()
    actions[5] = [v + 1e-6 for v in actions[5]]
    index = table.schema.get_field_index("action")
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(actions, table.schema.field(index).type)), file)
    compared, differing = compare_datasets(copy, farmed_workspace)
    assert compared > 5 and differing == 1


def test_the_kill_plan_follows_the_farm_and_covers_every_phase():
    plan = kill_plan(10)
    assert len(plan) == 10 and set(plan) == {"rollout", "write", "render", "review", "harvest"}
    assert plan.index("harvest") > plan.index("review") > plan.index("render") > plan.index("rollout")
