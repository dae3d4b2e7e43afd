"""Run a trained policy folder: full-resolution camera frames and the 14-D state in, a 14-D action out.

``runner = load_lerobot_policy(WS / "policies" / "act-cpu")``; per episode ``runner.reset()``; per
control tick ``action = runner.act({"head": frame, ...}, state)``. The runner resizes each frame with
the same :func:`datafarm.policy.spec.downscale` the derived training dataset was written with, and
feeds lerobot's own observation conversion, pre-processor, ``select_action`` and post-processor.
"""

from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from datafarm.errors import BadInput
from datafarm.policy.spec import CAMERA_KEYS, PolicySpec, downscale, load_policy_spec

log = logging.getLogger(__name__)

STATE_DIM = 14


@dataclass
class LerobotPolicyRunner:
    """A loaded lerobot policy and its processors; not thread-safe (ACT keeps an action queue)."""

    spec: PolicySpec
    policy: object  # lerobot PreTrainedPolicy
    preprocessor: object
    postprocessor: object
    instruction: str

    @property
    def cameras(self) -> tuple[str, ...]:
        """The views the policy looks at (a trial renders only these)."""
        return tuple(self.spec.cameras)

    def reset(self) -> None:
        """Forget the previous episode (ACT's action queue, Diffusion's observation history)."""
        self.policy.reset()
        for pipeline in (self.preprocessor, self.postprocessor):
            pipeline.reset()

    def act(self, frames: dict[str, np.ndarray], state: np.ndarray) -> np.ndarray:
        """One action (14,) float32 in rad / m from full-resolution HWC uint8 frames (farm camera names)."""
        import torch
        from lerobot.envs.utils import preprocess_observation

        missing = [camera for camera in self.spec.cameras if camera not in frames]
        if missing:
            raise BadInput(f"the policy needs cameras {self.spec.cameras}, frames lack {missing}; "
                           f"pass every camera the policy was trained on")
        state = np.asarray(state, dtype=np.float32).reshape(-1)
        if state.shape != (STATE_DIM,):
            raise BadInput(f"state must be ({STATE_DIM},), got {state.shape}; pass the rig's joint state")
        sizes = self.spec.image_sizes
        pixels = {CAMERA_KEYS[camera].rsplit(".", 1)[1]: np.array(downscale(frames[camera], sizes[camera]))[None]
                  for camera in self.spec.cameras}
        observation = preprocess_observation({"pixels": pixels, "agent_pos": state[None]})
        observation["task"] = [self.instruction]
        observation = self.preprocessor(observation)
        with torch.inference_mode():
            action = self.policy.select_action(observation)
        action = self.postprocessor(action)
        return action.detach().to("cpu").numpy().reshape(-1).astype(np.float32)


def load_lerobot_policy(folder: Path | str, device: str = "cpu", instruction: str = "",
                        n_action_steps: int | None = None,
                        temporal_ensemble: float | None = None) -> LerobotPolicyRunner:
    """Load ``folder`` (a trained policy folder with policy.json) for inference on ``device``.

    ``n_action_steps``: how many actions of each predicted chunk run before the policy looks again
    (default: the checkpoint's). Training never reads it, so a policy trained with chunk 50 can replan
    every 10 steps: closed loop where the task needs it (a grasp), at 5x the inference cost.
    ``temporal_ensemble`` (ACT only): predict a chunk every step and act on the weighted mean of every
    chunk's action for this step, weights exp(-coeff * age index) with the oldest first (ACT's paper: 0.01).
    """
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    folder = Path(folder)
    spec = load_policy_spec(folder)
    checkpoint = folder / spec.checkpoint
    if not checkpoint.is_dir():
        raise BadInput(f"{checkpoint} is missing: {folder} has no checkpoint; train it with "
                       f"`datafarm train WS --policy {spec.policy_type} --preset {spec.preset}`")
    config = PreTrainedConfig.from_pretrained(checkpoint)
    config.device = device
    if hasattr(config, "pretrained_backbone_weights"):
        config.pretrained_backbone_weights = None  # the checkpoint holds the trained backbone: load nothing else
    if temporal_ensemble is not None:
        config.temporal_ensemble_coeff = checked_ensemble(config, temporal_ensemble, n_action_steps)
        config.n_action_steps = 1
    elif n_action_steps is not None:
        config.n_action_steps = checked_action_steps(config, n_action_steps)
    with contextlib.redirect_stdout(io.StringIO()) as printed:  # lerobot prints "Loading weights ..." per load
        policy = get_policy_class(config.type).from_pretrained(checkpoint, config=config)
    log.debug("lerobot: %s", printed.getvalue().strip())
    policy.eval()
    overrides = {"device_processor": {"device": device}}
    preprocessor, postprocessor = make_pre_post_processors(config, pretrained_path=str(checkpoint),
                                                           preprocessor_overrides=overrides)
    log.info("loaded %s policy from %s (%d steps, cameras at %s, %s actions per prediction)", spec.policy_type,
             checkpoint, spec.steps, spec.image_sizes, getattr(config, "n_action_steps", 1))
    return LerobotPolicyRunner(spec, policy, preprocessor, postprocessor, instruction)


def checked_ensemble(config, coefficient: float, n_action_steps: int | None) -> float:
    """``coefficient`` if this checkpoint can ensemble its chunks, else a BadInput."""
    if not hasattr(config, "temporal_ensemble_coeff"):
        raise BadInput(f"temporal ensembling is ACT's; a {config.type} policy has none: drop --temporal-ensemble")
    if n_action_steps is not None:
        raise BadInput("--temporal-ensemble acts on every step: drop --n-action-steps")
    if not 0 <= coefficient < 1:
        raise BadInput(f"--temporal-ensemble {coefficient} is outside [0, 1): ACT's paper uses 0.01")
    return float(coefficient)


def checked_action_steps(config, n_action_steps: int) -> int:
    """``n_action_steps`` if the policy's predicted chunk holds that many actions, else a BadInput."""
    if not hasattr(config, "n_action_steps"):
        raise BadInput(f"a {config.type} policy predicts one action at a time: drop --n-action-steps")
    if getattr(config, "temporal_ensemble_coeff", None) is not None and n_action_steps != 1:
        raise BadInput("this ACT checkpoint uses temporal ensembling, which acts on every step: drop --n-action-steps")
    # ACT predicts chunk_size actions; Diffusion's usable ones start at its last observation step
    chunk = config.chunk_size if hasattr(config, "chunk_size") else config.horizon - config.n_obs_steps + 1
    if not 1 <= n_action_steps <= chunk:
        raise BadInput(f"--n-action-steps {n_action_steps} is outside 1..{chunk}: the policy predicts {chunk} "
                       f"actions at a time")
    return n_action_steps
