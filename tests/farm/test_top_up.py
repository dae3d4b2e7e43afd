"""The scheduled top-up's decisions, from each registered workspace's own records."""

import json

import pytest

from datafarm.costs import CostLedger
from datafarm.farm.fleet import Registry
from datafarm.farm.settings import SettingsError
from datafarm.farm.top_up import decide, set_target_count
from datafarm.workspace import Workspace
from datafarm.workspace.lock import acquire, release


def _workspace(tmp_path, name: str, target: int, admitted: int) -> Workspace:
    workspace = Workspace.initialise(tmp_path / name, {"settings": {"target_count": target}})
    for index in range(admitted):  # what rollout and review leave for an admitted episode
        workspace.write_json(f"episodes/{index:06d}/result.json", {"seed": index})
        workspace.write_json(f"episodes/{index:06d}/sim/episode.json", {"frames": 30, "fps": 30})
        workspace.write_json(f"episodes/{index:06d}/review.json", {"admitted": True})
    return workspace


def _decision(registry, workspace, episodes_per_run=None, max_usd=None):
    registry.register(workspace, max_usd)
    [entry] = [e for e in registry.entries() if e.workspace == str(workspace.root.resolve())]
    return decide(entry, episodes_per_run)


@pytest.fixture
def registry(tmp_path):
    return Registry(tmp_path / "farm")


def test_an_unfinished_workspace_is_farmed_to_its_target(tmp_path, registry):
    decision = _decision(registry, _workspace(tmp_path, "half", target=4, admitted=2))
    assert (decision.action, decision.reason, decision.target) == ("farm", "2 to go", 4)


def test_a_complete_workspace_is_skipped_unless_growth_is_asked(tmp_path, registry):
    workspace = _workspace(tmp_path, "done", target=2, admitted=2)
    assert _decision(registry, workspace).reason.startswith("complete")
    grown = _decision(registry, workspace, episodes_per_run=3)
    assert (grown.action, grown.target) == ("farm", 5)


def test_spent_and_running_workspaces_are_skipped(tmp_path, registry):
    spent = _workspace(tmp_path, "spent", target=4, admitted=0)
    CostLedger(spent.root).add_cpu("survey", 10.0)
    assert _decision(registry, spent, max_usd=1e-9).reason.startswith("over budget")
    assert _decision(registry, spent, max_usd=100.0).action == "farm"  # negative control: budget left
    running = _workspace(tmp_path, "running", target=4, admitted=0)
    holder = acquire(running.root, "nightly run")
    try:
        assert "nightly run" in _decision(registry, running).reason
    finally:
        release(running.root, holder)


def test_a_damaged_registered_workspace_is_skipped_with_the_reason(tmp_path, registry):
    workspace = _workspace(tmp_path, "damaged", target=1, admitted=0)
    registry.register(workspace)
    workspace.path("workspace.json").write_text("{not json")
    [decision] = [decide(e) for e in registry.entries()]
    assert decision.action == "skip" and "cannot be opened" in decision.reason


def test_raising_the_target_is_checked_like_every_setting(tmp_path):
    workspace = _workspace(tmp_path, "grow", target=2, admitted=0)
    set_target_count(workspace, 7)
    assert json.loads(workspace.path("workspace.json").read_text())["settings"]["target_count"] == 7
    with pytest.raises(SettingsError, match="target_count"):
        set_target_count(workspace, 0)


def test_raising_the_target_redoes_no_phase_before_the_episodes(tmp_path):
    """The nightly top-up raises targets: that must not author the task again (billed with an LLM author)."""
    import time

    from datafarm.farm.registry import PHASES
    from datafarm.farm.runner import phase_inputs_hash

    workspace = _workspace(tmp_path, "grown", target=2, admitted=2)
    authored = PHASES[:PHASES.index("rollout")]
    for phase in authored:
        workspace.record_phase(phase, "inputs", [], time.time())
    hashed = authored[1:]  # prepare is a command of its own
    before = {phase: phase_inputs_hash(workspace, phase) for phase in hashed}
    set_target_count(workspace, 5)
    assert {phase: phase_inputs_hash(workspace, phase) for phase in hashed} == before
    workspace.meta["settings"]["seed_start"] = 100  # negative control: a setting the phases read
    assert all(phase_inputs_hash(workspace, phase) != before[phase] for phase in hashed)


def test_farm_target_count_is_checked_before_anything_runs(tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    workspace = _workspace(tmp_path, "asked", target=2, admitted=0)
    workspace.path("calibration").mkdir()
    result = CliRunner().invoke(app, ["farm", str(workspace.root), "--target-count", "0"])
    assert result.exit_code == 2 and "target_count" in result.output
    assert json.loads(workspace.path("workspace.json").read_text())["settings"]["target_count"] == 2


@pytest.mark.slow
def test_the_top_up_flow_records_a_failing_workspace_and_goes_on(prefect_harness, tmp_path, monkeypatch):
    """Under Prefect: one workspace cannot be farmed (its calibration copy is gone), the other is complete;
    the run finishes, its summary artifact names the failure, and no lock is left behind."""
    from prefect.artifacts import Artifact

    from flows.top_up import top_up_flow

    monkeypatch.setenv("DATAFARM_FARM_ROOT", str(tmp_path / "farm"))
    registry = Registry(tmp_path / "farm")
    broken = _workspace(tmp_path, "broken", target=1, admitted=0)
    registry.register(broken)
    registry.register(_workspace(tmp_path, "complete", target=1, admitted=1))
    rows = {row["workspace"]: row for row in top_up_flow()}
    assert rows["complete"]["action"] == "skip" and rows["complete"]["reason"].startswith("complete")
    assert rows["broken"]["action"] == "farm" and rows["broken"]["failure"]
    assert rows["broken"]["episodes_added"] == 0
    assert not broken.path("farm.lock").exists()
    published = json.loads(Artifact.get("top-up-summary").data)
    assert {row["workspace"] for row in published} == {"broken", "complete"}


@pytest.mark.slow
def test_a_top_up_appends_its_episodes_to_the_delivery(farmed_workspace, prefect_harness, tmp_path):
    """Raising the target of a delivered workspace farms the new episodes and appends them to the delivery:
    the delivered videos stay as they were (never encoded again), and the whole still verifies."""
    import shutil

    from datafarm.farm.deliver import _delivery_unmodified, verify
    from datafarm.workspace import sha256_file
    from flows.farm import farm_flow

    root = tmp_path / "ws"
    shutil.copytree(farmed_workspace, root)
    workspace = Workspace.open(root)
    delivered = {f: sha256_file(root / f) for f in workspace.files_under("dataset") if f.endswith(".mp4")}
    set_target_count(workspace, 3)
    assert farm_flow(str(root)).ok
    workspace = Workspace.open(root)
    summary = workspace.read_json("reports/harvest.json")
    assert (summary["episodes"], summary["appended_to"]) == (3, 2), summary
    assert verify(workspace).ok
    assert {f: sha256_file(root / f) for f in delivered} == delivered
    assert _delivery_unmodified(workspace)
    video = root / next(iter(delivered))  # negative control: a changed byte and the next top-up writes afresh
    content = bytearray(video.read_bytes())
    content[-1] ^= 0xFF
    video.write_bytes(bytes(content))
    assert not _delivery_unmodified(workspace)
