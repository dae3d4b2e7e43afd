"""The env config lerobot parses for `--env.type=datafarm` (options are `--env.<field>=...`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig
from lerobot.utils.constants import ACTION, OBS_IMAGES, OBS_STATE

from datafarm.policy.spec import CAMERA_KEYS

STATE_DIM = 14


@EnvConfig.register_subclass("datafarm")
@dataclass
class DataFarmEnvConfig(EnvConfig):
    """A farmed workspace's task in closed loop, judged by its hidden judge.

    workspace: the farmed workspace (WS); appearance: original | unseen; policy_folder: a trained
    policy folder (policy.json) whose cameras and image size the observations follow (default: the
    workspace's only policy folder, else all three cameras at full resolution); seed_start: the first
    evaluation seed (lerobot's `--seed` is added to it; training seeds are refused); episode_length:
    control steps per episode (default: the task's time limit at 30 Hz).
    """

    task: str | None = "datafarm"
    fps: int = 30
    workspace: str = ""
    appearance: str = "original"
    policy_folder: str | None = None
    seed_start: int = 1_000_000
    episode_length: int | None = None
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.workspace:
            raise ValueError("--env.workspace is required: the farmed workspace whose task to evaluate")
        cameras, size = self.observed_cameras()
        self.features = {ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(STATE_DIM,)),
                         "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(STATE_DIM,))}
        self.features_map = {ACTION: ACTION, "agent_pos": OBS_STATE}
        for camera in cameras:
            key = CAMERA_KEYS[camera].rsplit(".", 1)[1]  # cam_high, cam_left_wrist, cam_right_wrist
            self.features[f"pixels/{key}"] = PolicyFeature(type=FeatureType.VISUAL, shape=(*size[camera], 3))
            self.features_map[f"pixels/{key}"] = f"{OBS_IMAGES}.{key}"

    def resolved_policy_folder(self) -> Path | None:
        if self.policy_folder:
            return Path(self.policy_folder)
        found = sorted(Path(self.workspace).glob("policies/*/policy.json"))
        return found[0].parent if len(found) == 1 else None

    def observed_cameras(self) -> tuple[list[str], dict[str, tuple[int, int]]]:
        """The cameras observed and each one's (height, width): the policy's, else the survey's full size."""
        folder = self.resolved_policy_folder()
        if folder is not None:
            from datafarm.policy.spec import load_policy_spec

            spec = load_policy_spec(folder)
            return list(spec.cameras), dict(spec.image_sizes)
        survey = json.loads((Path(self.workspace) / "survey.json").read_text())["cameras"]
        cameras = [c for c in CAMERA_KEYS if c in survey]
        return cameras, {c: (survey[c]["height"], survey[c]["width"]) for c in cameras}

    @property
    def gym_kwargs(self) -> dict:
        cameras, size = self.observed_cameras()
        return {"workspace": self.workspace, "appearance": self.appearance, "cameras": cameras, "image_sizes": size,
                "seed_start": self.seed_start, "episode_length": self.episode_length}

    def create_envs(self, n_envs: int, use_async_envs: bool = False) -> dict[str, dict[int, gym.vector.VectorEnv]]:
        """{"datafarm": {0: VectorEnv}} of DataFarmEnv, built directly (no gym registry entry needed)."""
        from gymnasium.vector import AutoresetMode

        from lerobot_env_datafarm.env import DataFarmEnv

        kwargs = self.gym_kwargs

        def make_one():
            return DataFarmEnv(**kwargs)

        if use_async_envs and n_envs > 1:
            vector = gym.vector.AsyncVectorEnv([make_one] * n_envs, autoreset_mode=AutoresetMode.SAME_STEP,
                                               context="spawn")
        else:
            vector = gym.vector.SyncVectorEnv([make_one] * n_envs, autoreset_mode=AutoresetMode.SAME_STEP)
        return {self.type: {0: vector}}
