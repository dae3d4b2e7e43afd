"""lerobot-eval on a farmed workspace through our env plugin (`--env.type=datafarm`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from datafarm.paths import REPO_ROOT


@pytest.fixture(scope="module")
def trained(farmed_workspace, tmp_path_factory) -> tuple[Path, Path]:
    from datafarm.policy.train import train_policy

    root = tmp_path_factory.mktemp("lerobot-env") / "ws"
    shutil.copytree(farmed_workspace, root)
    return root, train_policy(root, "act", "smoke").folder


def test_the_env_config_registers_and_describes_lerobots_layout(tmp_path):
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.utils import env_to_policy_features

    import lerobot_env_datafarm  # noqa: F401  (registers "datafarm")

    camera = {"width": 320, "height": 240}
    (tmp_path / "survey.json").write_text(json.dumps({"cameras": {c: camera for c in ("head", "left_wrist",
                                                                                         "right_wrist")}}))
    config_class = EnvConfig.get_choice_class("datafarm")
    config = config_class(workspace=str(tmp_path))
    features = env_to_policy_features(config)
    assert features["action"].shape == (14,) and features["observation.state"].shape == (14,)
    assert features["observation.images.cam_high"].shape == (3, 240, 320)  # full size without a policy folder
    with pytest.raises(ValueError, match="--env.workspace"):
        config_class()


@pytest.mark.slow
def test_the_env_runs_a_trial_in_lerobots_layout(trained):
    from lerobot_env_datafarm.env import DataFarmEnv

    root, policy = trained
    env = DataFarmEnv(str(root), cameras=["head"], image_sizes={"head": (48, 64)}, episode_length=6)
    observation, info = env.reset(seed=0)
    assert observation["pixels"]["cam_high"].shape == (48, 64, 3) and observation["pixels"]["cam_high"].dtype == np.uint8
    assert observation["agent_pos"].shape == (14,) and info["seed"] == 1_000_000
    done = False
    steps = 0
    while not done:
        observation, reward, terminated, truncated, info = env.step(observation["agent_pos"])
        done = terminated or truncated
        steps += 1
    assert steps == 6 and truncated and info["is_success"] is False and reward == 0.0
    env.close()


@pytest.mark.slow
def test_lerobot_eval_runs_one_trial(trained, tmp_path):
    root, policy = trained
    checkpoint = policy / json.loads((policy / "policy.json").read_text())["checkpoint"]
    lerobot_eval = Path(sys.executable).with_name("lerobot-eval")
    command = [str(lerobot_eval), "--env.type=datafarm", f"--env.workspace={root}", f"--policy.path={checkpoint}",
               "--env.episode_length=10", "--eval.n_episodes=1", "--eval.batch_size=1", "--policy.device=cpu",
               f"--output_dir={tmp_path / 'out'}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((tmp_path / "out" / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 1 and info["overall"]["pc_success"] == 0.0
