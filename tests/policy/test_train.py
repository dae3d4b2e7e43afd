"""Training with lerobot's own code on a farmed delivery: presets, the derived dataset, smoke training,
inference from the trained folder, resuming a killed run, pi05's wiring."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from datafarm.costs import CostLedger
from datafarm.errors import BadInput, Unavailable
from datafarm.policy.derived import derived_data, manifest_sha256
from datafarm.policy.frame_store import use_frame_store
from datafarm.policy.presets import (PRESET_NAMES, Preset, available_presets, lerobot_option_problems, load_preset,
                                     load_preset_file, pi05_problems)
from datafarm.policy.spec import CAMERA_KEYS, downscale, load_policy_spec
from datafarm.policy.train import checkpoint_step, lerobot_arguments, prune_checkpoints, train_policy

SMOKE_SIZE = (48, 64)
WRIST_SIZE = (24, 32)
SMOKE_SIZES = {"head": SMOKE_SIZE, "left_wrist": WRIST_SIZE}  # configs/policy/act-smoke.yaml


def test_every_preset_validates_against_lerobot():
    names = available_presets()
    for policy in ("act", "diffusion"):
        assert {f"{policy}-{name}" for name in PRESET_NAMES} <= set(names)
    assert "pi05-gpu" in names
    for name in names:
        preset = load_preset(*name.split("-"))
        assert preset.folder_name == name
        assert lerobot_option_problems(preset) == [], name
    cpu = load_preset("act", "cpu")
    assert (cpu.image_sizes, cpu.batch_size) == (
        {"head": (96, 128), "left_wrist": (48, 64), "right_wrist": (48, 64)}, 16)
    assert (cpu.policy_options["dim_model"], cpu.policy_options["n_encoder_layers"], cpu.policy_options["chunk_size"]) \
        == (256, 2, 50)
    gpu = load_preset("act", "gpu")
    assert gpu.image_size is None and set(gpu.cameras) == set(CAMERA_KEYS) and not gpu.needs_derived_dataset


def test_a_wrong_preset_is_refused(tmp_path):
    good = load_preset("act", "smoke").model_dump(mode="json")
    bad_camera = tmp_path / "act-smoke.yaml"
    bad_camera.write_text(yaml.safe_dump({**good, "cameras": ["top"]}))
    with pytest.raises(BadInput, match="unknown cameras"):
        load_preset_file(bad_camera)
    misnamed = tmp_path / "act-cpu.yaml"
    misnamed.write_text(yaml.safe_dump(good))
    with pytest.raises(BadInput, match="name the file act-smoke.yaml"):
        load_preset_file(misnamed)
    typo = Preset.model_validate({**good, "policy_options": {"dim_modle": 32}})
    assert lerobot_option_problems(typo) == ["act-smoke: lerobot's ACTConfig has no option 'dim_modle'"]
    with pytest.raises(BadInput, match="known presets"):
        load_preset("act", "huge")
    unused_size = tmp_path / "act-smoke.yaml"
    unused_size.write_text(yaml.safe_dump({**good, "camera_sizes": {"right_wrist": [24, 32]}}))
    with pytest.raises(BadInput, match=r"camera_sizes names \['right_wrist'\]"):
        load_preset_file(unused_size)


def test_a_policy_folder_from_before_per_camera_sizes_still_loads(tmp_path):
    legacy = {"policy_type": "act", "preset": "cpu", "checkpoint": "x", "cameras": ["head", "left_wrist"],
              "image_size": [96, 128], "dataset_manifest_sha256": "0" * 64, "task": "t", "steps": 1, "fps": 30}
    (tmp_path / "policy.json").write_text(json.dumps(legacy))
    assert load_policy_spec(tmp_path).image_sizes == {"head": (96, 128), "left_wrist": (96, 128)}


def test_only_the_newest_checkpoints_stay(tmp_path):
    checkpoints = tmp_path / "lerobot" / "checkpoints"
    for step in (250, 500, 750, 1000, 1250):
        (checkpoints / f"{step:06d}" / "pretrained_model").mkdir(parents=True)
    (checkpoints / "last").symlink_to("001000")  # 001250 is still being written: `last` does not point at it yet
    assert prune_checkpoints(tmp_path, None) == []
    assert prune_checkpoints(tmp_path, 2) == [250, 500]  # `last` and the one before it
    assert sorted(p.name for p in checkpoints.iterdir()) == ["000750", "001000", "001250", "last"]
    assert prune_checkpoints(tmp_path, 2) == [] and (checkpoints / "last" / "pretrained_model").is_dir()


def test_pi05_wiring(tmp_path):
    """pi05 trains from a local pi05_base with lerobot's `--policy.path`; here (no `pi` extra) it is refused."""
    preset = load_preset("pi05", "gpu")
    assert preset.needs_extra == "pi" and lerobot_option_problems(preset) == []
    from datafarm.policy.derived import TrainingData

    data = TrainingData(tmp_path / "dataset", "datafarm/x", list(CAMERA_KEYS), (240, 320), "0" * 64, 30, derived=False)
    arguments = lerobot_arguments(preset, data, tmp_path / "out", 30000, resume=False, backbone_weights=None)
    assert f"--policy.path={Path(preset.pretrained_path).expanduser()}" in arguments
    assert not any(a.startswith("--policy.type") or "backbone" in a for a in arguments)
    assert "--policy.dtype=bfloat16" in arguments and "--policy.gradient_checkpointing=true" in arguments
    problems = pi05_problems()
    if problems:
        with pytest.raises(Unavailable, match="pi05 cannot train here") as raised:
            train_policy(tmp_path, "pi05", "gpu")
        assert raised.value.exit_code == 5 and "`pi` extra" in str(raised.value)


def _copy(workspace: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(workspace, copy, ignore=shutil.ignore_patterns("policies", "derived"))
    return copy


@pytest.mark.slow
def test_derived_dataset_is_cached_and_rebuilt_for_a_new_delivery(farmed_workspace, tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    workspace = _copy(farmed_workspace, tmp_path)
    first = derived_data(workspace, SMOKE_SIZES)
    assert first.built_seconds > 0 and first.image_sizes == SMOKE_SIZES and first.derived
    assert first.root.name == "head-48x64+left_wrist-24x32"
    derived = LeRobotDataset(first.repo_id, root=first.root)
    delivered = LeRobotDataset("datafarm/delivered", root=workspace / "dataset")
    assert derived.meta.total_frames == delivered.meta.total_frames
    assert derived.meta.video_keys == [] and derived.meta.camera_keys == [CAMERA_KEYS[c] for c in SMOKE_SIZES]
    for index in (0, delivered.meta.total_frames - 1):
        for camera, size in SMOKE_SIZES.items():
            key = CAMERA_KEYS[camera]
            full = (delivered[index][key].numpy().transpose(1, 2, 0) * 255).round().astype(np.uint8)
            small = (derived[index][key].numpy().transpose(1, 2, 0) * 255).round().astype(np.uint8)
            assert small.shape == (*size, 3)
            assert np.abs(small.astype(int) - downscale(full, size).astype(int)).max() <= 1
        assert np.allclose(derived[index]["action"], delivered[index]["action"])

    _assert_frame_store_serves_what_lerobot_reads(first.repo_id, first.root, [CAMERA_KEYS[c] for c in SMOKE_SIZES])

    again = derived_data(workspace, SMOKE_SIZES)
    assert again.built_seconds == 0 and again.root == first.root

    manifest = workspace / "manifest.json"
    changed = json.loads(manifest.read_text())
    changed["redelivered"] = True
    manifest.write_text(json.dumps(changed))
    rebuilt = derived_data(workspace, SMOKE_SIZES)
    assert rebuilt.built_seconds > 0 and rebuilt.manifest_sha256 == manifest_sha256(workspace) != first.manifest_sha256


def _assert_frame_store_serves_what_lerobot_reads(repo_id: str, root: Path, camera_keys: list[str]) -> None:
    """Samples with an action chunk, through the store and pickled (as a loader worker gets them), match lerobot's."""
    import pickle

    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    chunk = {"action": [step / 30 for step in range(50)]}
    parquet = LeRobotDataset(repo_id, root=root, delta_timestamps=chunk)
    stored = LeRobotDataset(repo_id, root=root, delta_timestamps=chunk)
    use_frame_store(stored, camera_keys)
    stored = pickle.loads(pickle.dumps(stored))
    for index in (0, parquet.meta.total_frames // 2, parquet.meta.total_frames - 1):
        expected, got = parquet[index], stored[index]
        assert set(got) == set(expected)
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                assert got[key].dtype == value.dtype and torch.equal(got[key], value), key


@pytest.mark.slow
def test_smoke_training_makes_a_policy_that_acts(farmed_workspace, tmp_path):
    from datafarm.policy.inference import load_lerobot_policy

    workspace = _copy(farmed_workspace, tmp_path)
    result = train_policy(workspace, "act", "smoke")
    folder = workspace / "policies" / "act-smoke"
    assert result.folder == folder and result.steps_done == 4 == checkpoint_step(folder)
    spec = load_policy_spec(folder)
    seeds = [json.loads(p.read_text())["seed"] for p in sorted((workspace / "episodes").glob("*/result.json"))]
    admitted = json.loads((workspace / "manifest.json").read_text())["episodes"]
    assert sorted(spec.train_episode_seeds) == sorted(
        json.loads((workspace / "episodes" / f"{i:06d}" / "result.json").read_text())["seed"] for i in admitted)
    assert set(spec.train_episode_seeds) <= set(seeds) and len(spec.train_episode_seeds) == 2
    assert spec.dataset_manifest_sha256 == manifest_sha256(workspace)
    assert (spec.image_sizes, spec.steps, spec.task) == (SMOKE_SIZES, 4, "apple_on_scale")
    assert spec.training_light_gains == (0.8, 1.2)  # the workspace's render light reach, for the unseen check
    assert (folder / "loss_curve.png").stat().st_size > 0 and (folder / "preset.yaml").is_file()
    assert result.timing is not None and 0 < result.timing.loading_share < 1
    assert "frames from its frame store" in (folder / "train.log").read_text()
    charged = [e for e in CostLedger(workspace).entries() if e.phase == "train:act-smoke"]
    assert {e.item for e in charged} >= {"cpu", "wall"} and all(e.quantity > 0 for e in charged)

    runner = load_lerobot_policy(folder)
    runner.reset()
    frames = {camera: np.full((240, 320, 3), 128, np.uint8) for camera in CAMERA_KEYS}
    state = np.zeros(14, np.float32)
    action = runner.act(frames, state)
    assert action.shape == (14,) and action.dtype == np.float32 and np.isfinite(action).all()
    moved = runner.act({**frames, "head": np.zeros((240, 320, 3), np.uint8)}, state + 0.3)
    assert moved.shape == (14,)
    with pytest.raises(BadInput, match="frames lack"):
        runner.act({"left_wrist": frames["left_wrist"]}, state)

    replanning = load_lerobot_policy(folder, n_action_steps=3)  # runs 3 of each 10-action chunk, then looks again
    replanning.reset()
    replanning.act(frames, state)
    assert len(replanning.policy._action_queue) == 2
    with pytest.raises(BadInput, match="outside 1..10"):
        load_lerobot_policy(folder, n_action_steps=11)

    again = train_policy(workspace, "act", "smoke")  # done already: nothing retrained
    assert again.wall_seconds == 0 and again.steps_done == 4


def _train_in_background(workspace: Path, preset) -> subprocess.Popen:
    """`train_policy` in its own process (and session), charging its cost every second, returned once its first
    checkpoint is written."""
    script = ("import sys; from datafarm.policy import train; from datafarm.policy.presets import Preset; "
              "train.CHARGE_EVERY_S = 1.0; "
              "train.train_policy(sys.argv[1], 'act', 'smoke', preset=Preset.model_validate_json(sys.argv[2]))")
    process = subprocess.Popen([sys.executable, "-c", script, str(workspace), preset.model_dump_json()],
                               start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = workspace / "policies" / "act-smoke"
    deadline = time.monotonic() + 600
    while checkpoint_step(folder) == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return process


def _trainer_ends_with(process: subprocess.Popen, folder: Path) -> None:
    process.wait()
    deadline = time.monotonic() + 30
    while _processes_mentioning(str(folder)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_mentioning(str(folder)), "lerobot's training outlived the killed command"
    with contextlib.suppress(ProcessLookupError):  # anything else left in the session (nothing, if the above holds)
        os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow
def test_killed_training_resumes_from_its_last_checkpoint(farmed_workspace, tmp_path):
    workspace = _copy(farmed_workspace, tmp_path)
    preset = load_preset("act", "smoke").model_copy(update={"steps": 30, "save_freq": 2})
    folder = workspace / "policies" / "act-smoke"
    process = _train_in_background(workspace, preset)
    os.kill(process.pid, signal.SIGKILL)  # the command only, as a user's kill -9 would: its trainer must follow
    _trainer_ends_with(process, folder)
    killed_at = checkpoint_step(folder)
    assert 0 < killed_at < 30, f"the kill came too late (step {killed_at}) to test resuming"
    charged = CostLedger(workspace).by_phase().get("train:act-smoke", {})
    assert charged.get("cpu", 0) > 0, f"a kill -9 lost the training's cost: {charged}"

    result = train_policy(workspace, "act", "smoke", preset=preset)
    assert result.resumed_from == killed_at and result.steps_done == 30 == checkpoint_step(folder)
    assert "--resume=true" in (folder / "train.log").read_text()
    logged = [json.loads(line)["steps"] for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1] == 30 and any(step > killed_at for step in logged)


@pytest.mark.slow
def test_stopped_training_is_charged_and_stops_its_trainer(farmed_workspace, tmp_path):
    """A plain `kill` (SIGTERM, what a scheduler or a container stop sends) ends the trainer too, and the run's
    CPU time reaches the ledger: an hour of training stopped this way used to leave no cost behind."""
    from datafarm.costs import CostLedger

    workspace = _copy(farmed_workspace, tmp_path)
    preset = load_preset("act", "smoke").model_copy(update={"steps": 30, "save_freq": 2})
    process = _train_in_background(workspace, preset)
    os.kill(process.pid, signal.SIGTERM)
    folder = workspace / "policies" / "act-smoke"
    _trainer_ends_with(process, folder)
    assert process.returncode != 0
    charged = CostLedger(workspace).by_phase().get("train:act-smoke", {})
    assert charged.get("cpu", 0) > 0, charged
    # the stopped run is on record too: how far it got, what it cost and why it stopped
    [run] = json.loads((folder / "training.json").read_text())["runs"]
    assert run["from_step"] == 0 and run["to_step"] == checkpoint_step(folder) and run["cpu_seconds"] > 0
    assert "SIGTERM" in run["stopped"]


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_backbone_from_random_weights_trains_its_norms_and_still_loads_into_lerobots_act(tmp_path):
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from torchvision.ops.misc import FrozenBatchNorm2d

    from datafarm.policy.lerobot_run import with_trainable_backbone_norm

    torch.manual_seed(0)
    config = ACTConfig(pretrained_backbone_weights=None, dim_model=32, n_heads=2, dim_feedforward=64,
                       n_encoder_layers=1, n_vae_encoder_layers=1, latent_dim=8, chunk_size=4, n_action_steps=4,
                       device="cpu", push_to_hub=False,
                       input_features={"observation.state": PolicyFeature(FeatureType.STATE, (3,)),
                                       "observation.images.head": PolicyFeature(FeatureType.VISUAL, (3, 32, 32))},
                       output_features={"action": PolicyFeature(FeatureType.ACTION, (3,))})
    policy = ACTPolicy(config)
    frozen = [m for m in policy.model.backbone.modules() if isinstance(m, FrozenBatchNorm2d)]
    for norm in frozen:  # statistics as training leaves them, not the identity
        for tensor in (norm.weight, norm.bias, norm.running_mean):
            tensor.normal_(0, 0.3)
        norm.running_var.uniform_(0.5, 2.0)
    batch = {"observation.state": torch.randn(2, 3), "observation.images.head": torch.rand(2, 3, 32, 32)}
    policy.eval()
    before = policy.predict_action_chunk(batch)
    keys = set(policy.state_dict())

    assert with_trainable_backbone_norm(policy) == len(frozen) > 0
    norms = [m for m in policy.model.backbone.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(norms) == len(frozen) and all(m.weight.requires_grad for m in norms)
    assert not any(isinstance(m, FrozenBatchNorm2d) for m in policy.model.backbone.modules())
    assert {id(p) for p in norms[0].parameters()} <= {id(p) for group in policy.get_optim_params()
                                                       for p in group["params"]}
    policy.eval()
    assert torch.allclose(policy.predict_action_chunk(batch), before, atol=1e-5)
    assert set(policy.state_dict()) == keys  # the checkpoint has exactly lerobot's keys

    policy.save_pretrained(tmp_path / "model")
    loaded = ACTPolicy.from_pretrained(tmp_path / "model")
    assert any(isinstance(m, FrozenBatchNorm2d) for m in loaded.model.backbone.modules())
    loaded.eval()
    assert torch.allclose(loaded.predict_action_chunk(batch), before, atol=1e-5)

    policy.train()
    policy.model.backbone(batch["observation.images.head"])  # a training forward updates the statistics
    assert not torch.equal(norms[0].running_mean, frozen[0].running_mean)

    loaded.config.pretrained_backbone_weights = "ResNet18_Weights.IMAGENET1K_V1"  # pretrained: statistics stay frozen
    assert with_trainable_backbone_norm(loaded) == 0


def test_a_step_slowed_by_shared_cores_is_noticed():
    from datafarm.policy.curve import slowed_down

    def windows(*seconds):
        return [{"steps": 25 * (i + 1), "update_s": s, "dataloading_s": 0.01} for i, s in enumerate(seconds)]

    assert slowed_down(windows(3.0, 0.7, 0.72, 0.69, 0.7, 0.71)) is None  # the first window (model build) is skipped
    assert slowed_down(windows(3.0, 0.7, 0.72, 8.5)) is None  # too little history to tell
    usual, latest = slowed_down(windows(3.0, 0.7, 0.72, 0.69, 0.7, 8.5))
    assert usual == pytest.approx(0.71) and latest == pytest.approx(8.51)
