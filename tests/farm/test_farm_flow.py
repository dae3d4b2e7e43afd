"""The farm end to end under Prefect's engine, and verify's negative controls."""

import json
import shutil

import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from datafarm.costs import CostLedger
from datafarm.farm.deliver import verify
from datafarm.farm.episodes import admitted_episodes, attempts
from datafarm.workspace import Workspace

pytestmark = pytest.mark.slow


def _copy(workspace_root, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(workspace_root, target)
    return Workspace.open(target)


def test_the_farm_delivers_a_verified_lerobot_dataset(farmed_workspace):
    workspace = Workspace.open(farmed_workspace)
    assert verify(workspace).ok
    dataset = LeRobotDataset("datafarm/episodes", root=workspace.path("dataset"))
    assert dataset.meta.total_episodes == 2
    assert {"observation.images.cam_high", "observation.images.cam_left_wrist",
            "observation.images.cam_right_wrist"} <= set(dataset.meta.video_keys)
    for relative in ["survey.json", "scene/grounding.json", "contract.json", "review/contract.json",
                     "judge/judge.py", "expert/report.json", "manifest.json"]:
        assert workspace.path(relative).exists(), relative
    assert all(a.accepted or a.reason for a in attempts(workspace))
    # the delivery says what it was randomized over: every family, on or off, with its ranges
    described = json.loads(workspace.path("dataset", "datafarm_harvest.json").read_text())
    assert {"execution", "geometry", "appearance", "camera", "speed"} <= set(described["randomization"])
    assert described["render"]["renderer"] == "composite" and described["render"]["appearance_families"]
    # the contract names the judge's checks but carries none of its text (the expert's author reads it)
    control = workspace.read_json("contract.json")["negative_control"]
    assert control["do_nothing_rejected"] and control["failed_checks"]
    assert set(control) == {"do_nothing_rejected", "failed_checks"}


def test_costs_are_recorded_per_phase_and_episode(farmed_workspace):
    ledger = CostLedger(farmed_workspace)
    phases = ledger.by_phase()
    assert {"survey", "build", "rollout", "render", "review", "harvest"} <= set(phases)
    assert set(ledger.by_episode()) >= set(admitted_episodes(Workspace.open(farmed_workspace)))
    assert ledger.total() > 0


def test_the_flow_simulates_a_seed_while_it_renders_and_reviews_the_episode_before(farmed_workspace):
    """Two cores at work: a later seed's rollout (in its sandboxed worker) overlaps the first episode's render
    and review (in the flow's process)."""
    timings = Workspace.open(farmed_workspace).timings()
    spans = {phase: [(t["end"] - t["seconds"], t["end"]) for t in timings if t["phase"] == phase]
             for phase in ("rollout", "render", "review")}
    overlap = sum(max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
                  for a in spans["rollout"] for b in spans["render"] + spans["review"])
    assert overlap > 1.0, spans


def test_the_review_holds_episodes_to_the_workspaces_own_limits(farmed_workspace, tmp_path):
    from datafarm.farm.episodes import review_episode

    workspace = _copy(farmed_workspace, tmp_path)
    assert review_episode(workspace, 0)["admitted"]
    workspace.meta["settings"]["review"] = {"min_robot_iou": 1.01}  # no render can reach it
    workspace.save_meta()
    review = review_episode(workspace, 0)
    assert not review["admitted"] and review["thresholds"]["min_robot_iou"] == 1.01
    assert any(reason.startswith("robot_mask_iou") and "limit 1.01" in reason for reason in review["reasons"])


def test_a_rerun_skips_finished_phases(farmed_workspace, prefect_harness):
    from flows.farm import farm_flow

    workspace = Workspace.open(farmed_workspace)
    before = {p: workspace.phase_record(p).finished for p in ("survey", "build", "expert")}
    tried = len(attempts(workspace))
    delivered = workspace.path("manifest.json").read_bytes()
    written = workspace.path("dataset", "meta", "info.json").stat().st_mtime_ns
    assert farm_flow(str(farmed_workspace)).ok
    after = {p: workspace.phase_record(p).finished for p in ("survey", "build", "expert")}
    assert before == after
    assert len(attempts(workspace)) == tried  # no new rollouts
    # the complete delivery is left as it is, not written again: a policy trained on it still names it
    assert workspace.path("manifest.json").read_bytes() == delivered
    assert workspace.path("dataset", "meta", "info.json").stat().st_mtime_ns == written


def test_verify_catches_a_changed_byte(farmed_workspace, tmp_path):
    workspace = _copy(farmed_workspace, tmp_path)
    target = next(p for p in workspace.path("dataset").rglob("*.parquet"))
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    problems = verify(workspace).problems
    assert any("modified file" in p and target.name in p for p in problems), problems


def test_verify_catches_a_deleted_episode(farmed_workspace, tmp_path):
    workspace = _copy(farmed_workspace, tmp_path)
    manifest = json.loads(workspace.path("manifest.json").read_text())
    shutil.rmtree(workspace.path(f"episodes/{manifest['episodes'][0]:06d}"))
    problems = verify(workspace).problems
    assert any("review.json is missing" in p or "missing file" in p for p in problems), problems


def test_verify_catches_a_missing_review(farmed_workspace, tmp_path):
    workspace = _copy(farmed_workspace, tmp_path)
    manifest = json.loads(workspace.path("manifest.json").read_text())
    workspace.path(f"episodes/{manifest['episodes'][1]:06d}/review.json").unlink()
    problems = verify(workspace).problems
    assert any("review.json is missing" in p for p in problems), problems


def test_show_makes_a_contact_sheet_and_a_preview(farmed_workspace):
    from datafarm.farm.show import show_episode

    sheet, preview = show_episode(Workspace.open(farmed_workspace))
    assert sheet.exists() and sheet.stat().st_size > 10_000
    assert preview.exists()
