"""What a trained policy folder declares about itself, and the one image resize shared by training and evaluation.

A trained policy is a folder ``WS/policies/<policy>-<preset>/`` holding lerobot's checkpoint and
``policy.json`` (a :class:`PolicySpec`). Training writes the spec; closed-loop evaluation reads it to know
which cameras and image size the policy expects and which rollout seeds it must never be evaluated on.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

from datafarm.cameras import CAMERA_KEYS  # noqa: F401  (re-exported by datafarm.policy)
from datafarm.errors import BadInput

SPEC_FILE = "policy.json"

STATE_KEY = "observation.state"
ACTION_KEY = "action"


class PolicySpec(BaseModel):
    """The contract between a trained policy folder and whoever runs it (evaluation, lerobot-eval)."""

    model_config = ConfigDict(extra="forbid")

    policy_type: str                    # "act" | "diffusion" | "pi05"
    preset: str                         # "smoke" | "cpu" | "gpu"
    checkpoint: str                     # lerobot's pretrained_model dir, relative to the policy folder
    cameras: list[str]                  # farm camera names used as inputs, e.g. ["head"]
    image_sizes: dict[str, tuple[int, int]]  # each camera's (height, width) as trained
    dataset_manifest_sha256: str        # SHA-256 of WS/manifest.json the policy was trained on
    train_episode_seeds: list[int] = Field(default_factory=list)  # rollout seeds of every training episode
    task: str                           # the workspace's task name
    steps: int                          # optimizer steps done when the checkpoint was written
    fps: int
    # the training workspace's render light gains (randomization.light_gains): how strong a tint it saw
    training_light_gains: tuple[float, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_size_for_every_camera(cls, data):
        # policy.json before per-camera sizes held one image_size for all its cameras
        if isinstance(data, dict) and "image_size" in data and "image_sizes" not in data:
            data = dict(data)
            size = data.pop("image_size")
            data["image_sizes"] = {camera: size for camera in data.get("cameras", [])}
        return data

    @model_validator(mode="after")
    def _every_camera_has_a_size(self) -> PolicySpec:
        if set(self.image_sizes) != set(self.cameras):
            raise ValueError(f"image_sizes names {sorted(self.image_sizes)}, cameras are {self.cameras}: "
                             "give each camera its (height, width)")
        return self


def load_policy_spec(folder: Path | str) -> PolicySpec:
    """Read ``policy.json`` from a trained policy folder."""
    path = Path(folder) / SPEC_FILE
    if not path.is_file():
        raise BadInput(f"{path} does not exist: {folder} is not a trained policy folder; "
                       f"train one with `datafarm train WS --policy act --preset cpu`")
    return PolicySpec.model_validate(json.loads(path.read_text()))


def write_policy_spec(folder: Path | str, spec: PolicySpec) -> Path:
    path = Path(folder) / SPEC_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.model_dump_json(indent=2) + "\n")
    return path


def downscale(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize an (H, W, 3) uint8 frame to ``size`` = (height, width) the one way training and evaluation share.

    PIL's bilinear filter widens its support when shrinking (an area-like average), so small training
    images are not aliased. A frame already at ``size`` is returned unchanged.
    """
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise BadInput(f"downscale expects an (H, W, 3) uint8 frame, got shape {frame.shape} dtype {frame.dtype}; "
                       "pass the camera image as rendered")
    height, width = int(size[0]), int(size[1])
    if frame.shape[:2] == (height, width):
        return frame
    return np.asarray(Image.fromarray(frame).resize((width, height), Image.BILINEAR))
