"""Pose pretraining: targets from the workspace's traces, and a fresh ACT that really starts from the result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from datafarm.policy.derived import derived_data, manifest_sha256
from datafarm.policy.pose_pretraining import pose_targets, report_path
from datafarm.policy.presets import Preset, load_preset
from datafarm.policy.train import POSE_BACKBONE, train_policy


def test_pose_pretraining_is_for_a_random_act_backbone_only():
    smoke = load_preset("act", "smoke").model_dump()
    settings = {"steps": 2, "batch_size": 2}
    assert Preset.model_validate({**smoke, "pose_pretraining": settings}).pose_pretraining.steps == 2
    for refused in ({"policy": "diffusion"}, {"pretrained_path": "~/pi"},
                    {"image_size": None, "camera_sizes": {}, "cameras": ["head", "left_wrist", "right_wrist"]},
                    {"backbone": {"weights": "ResNet18_Weights.IMAGENET1K_V1", "torch_home": "~"}}):
        with pytest.raises(ValueError, match="pose_pretraining initialises a random ACT backbone"):
            Preset.model_validate({**smoke, "pose_pretraining": settings, **refused})


@pytest.mark.slow
def test_a_fresh_act_starts_from_its_pose_pretrained_backbone(farmed_workspace, tmp_path):
    import torch

    workspace = tmp_path / "ws"
    shutil.copytree(farmed_workspace, workspace, ignore=shutil.ignore_patterns("policies"))
    preset = Preset.model_validate({**load_preset("act", "smoke").model_dump(),
                                    "pose_pretraining": {"steps": 3, "batch_size": 4}})

    # the targets are the trace's truth for the frame the dataset holds at that row
    data = derived_data(workspace, preset.image_sizes)
    targets, episode_of = pose_targets(workspace, data.root, preset.cameras)
    harvest = json.loads((data.root / "datafarm_harvest.json").read_text())["episodes"]
    second = harvest[1]["farm_index"]
    trace = np.load(workspace / "episodes" / f"{second:06d}" / "trace.npz")
    row = int(np.flatnonzero(episode_of == 1)[5])
    apple = sorted(k for k in trace.files if k.startswith("pose/"))[0]
    assert np.allclose(targets["head"][row][:3], trace[apple][5][:3, 3])
    assert np.allclose(targets["left_wrist"][row][:3], trace[apple][5][:3, 3] - trace["tcp"][5][0])
    total = json.loads((data.root / "meta" / "info.json").read_text())["total_frames"]
    assert len(targets["head"]) == len(targets["left_wrist"]) == len(episode_of) == total

    train_policy(workspace, "act", "smoke", preset=preset)
    folder = workspace / "policies" / "act-smoke"
    report = json.loads(report_path(folder / POSE_BACKBONE).read_text())
    assert report["steps"] == 3 and report["dataset_manifest_sha256"] == manifest_sha256(workspace)
    assert np.isfinite(report["held_out_error_cm"]) and report["cpu_seconds"] > 0
    log = (folder / "train.log").read_text()
    assert f"the backbone starts from {folder / POSE_BACKBONE}" in log

    # the trained checkpoint's ResNet is the pretrained one, moved by 4 small steps, not a fresh random one
    from safetensors.torch import load_file

    trained = load_file(folder / "lerobot/checkpoints/last/pretrained_model/model.safetensors")
    initial = torch.load(folder / POSE_BACKBONE, weights_only=True)
    conv = trained["model.backbone.conv1.weight"]
    assert (conv - initial["conv1.weight"]).norm() < 0.1 * initial["conv1.weight"].norm()

    # a second fresh run on the same delivery reuses the pretrained backbone; a kill leaves nothing half-written
    stamp = (folder / POSE_BACKBONE).stat().st_mtime_ns
    shutil.rmtree(folder / "lerobot")
    train_policy(workspace, "act", "smoke", preset=preset)
    assert (folder / POSE_BACKBONE).stat().st_mtime_ns == stamp
    assert not list(Path(folder).glob("*.partial"))
