"""A farmed workspace's task as a gymnasium env in lerobot's layout, one closed-loop trial per episode.

Observations: {"pixels": {cam_high | cam_left_wrist | cam_right_wrist: (H, W, 3) uint8}, "agent_pos": (14,)},
rendered by the farm's renderer frame by frame and resized with the training's own `downscale`. Actions:
(14,) joint targets (rad / m) through the expert's control path. Reward 1 on success, else 0;
`info["is_success"]` is the hidden judge's verdict (sandboxed), `terminated` at success or a safety
stop, `truncated` at the episode length. Each episode is datafarm.policy.trials.Trial on an
evaluation seed (seed_start + the seed lerobot passes); training seeds are refused.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np

from datafarm.policy.spec import CAMERA_KEYS, downscale

STATE_DIM = 14


class DataFarmEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, workspace: str, appearance: str = "original", cameras: list[str] | None = None,
                 image_sizes: dict[str, tuple[int, int]] | None = None, seed_start: int = 1_000_000,
                 episode_length: int | None = None):
        from datafarm.policy.evaluate import training_seeds
        from datafarm.policy.trials import trial_setup
        from datafarm.workspace import Workspace

        self.workspace = Workspace.open(workspace)
        self.setup = trial_setup(self.workspace)
        self.appearance = appearance
        self.cameras = list(cameras or CAMERA_KEYS)
        self.image_sizes = dict(image_sizes or {})
        self.seed_start = seed_start
        self.forbidden_seeds = training_seeds(self.workspace, "do-nothing")
        hz = self.setup.rig_config.timing.control_hz
        self._max_episode_steps = episode_length or int(self.setup.package.info.max_seconds * hz)
        self.task_description = self.setup.package.info.instruction
        self.task = self.setup.package.name
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Dict({
            "pixels": gym.spaces.Dict({self._key(c): gym.spaces.Box(0, 255, (*self._size(c), 3), np.uint8)
                                       for c in self.cameras}),
            "agent_pos": gym.spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float64)})
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32)
        self._judge = None
        self._trial = None
        self._frames: dict[str, np.ndarray] = {}
        self._episodes = 0

    def _key(self, camera: str) -> str:
        return CAMERA_KEYS[camera].rsplit(".", 1)[1]

    def _size(self, camera: str) -> tuple[int, int]:
        if camera in self.image_sizes:
            return tuple(self.image_sizes[camera])
        spec = self.setup.rig_config.cameras[camera]
        return spec.height, spec.width

    def _observation(self) -> dict:
        self._frames = self._trial.observe()
        pixels = {self._key(c): downscale(self._frames[c], self._size(c)) for c in self.cameras}
        return {"pixels": pixels, "agent_pos": self._trial.state().astype(np.float64)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        from datafarm.errors import Refused
        from datafarm.policy.trials import Trial, TrialJudge

        super().reset(seed=seed)
        eval_seed = self.seed_start + (seed if seed is not None else self._episodes)
        if eval_seed in self.forbidden_seeds:
            raise Refused(f"evaluation seed {eval_seed} was a training seed of {self.workspace.root}: "
                          f"pass --env.seed_start beyond {max(self.forbidden_seeds)}")
        self._episodes += 1
        if self._judge is None:
            workdir = Path(tempfile.mkdtemp(prefix="judge-", dir=self.workspace.path("evals").resolve()
                                            if self.workspace.path("evals").exists() else None))
            self._judge = TrialJudge(self.setup.package, workdir, [self.workspace.path("expert")])
        hz = self.setup.rig_config.timing.control_hz
        self._trial = Trial(self.setup, eval_seed, self.appearance, self._judge,
                            time_limit_s=self._max_episode_steps / hz, cameras=tuple(self.cameras))
        return self._observation(), {"is_success": False, "seed": eval_seed}

    def step(self, action):
        done = self._trial.apply(np.asarray(action, dtype=np.float64).reshape(-1))
        success = bool(done and self._trial.end == "success")
        info = {"is_success": success, "seed": self._trial.seed, "end": self._trial.end}
        terminated = done and self._trial.end in ("success", "safety_stop")
        truncated = done and not terminated
        observation = self._observation() if not done else {
            "pixels": {self._key(c): downscale(self._frames[c], self._size(c)) for c in self.cameras},
            "agent_pos": self._trial.state().astype(np.float64)}
        return observation, float(success), terminated, truncated, info

    def render(self) -> np.ndarray:
        """The head camera as the policy saw it last (full resolution)."""
        return self._frames.get("head", next(iter(self._frames.values())))

    def close(self) -> None:
        if self._judge is not None:
            self._judge.close()
            self._judge = None
