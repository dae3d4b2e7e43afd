"""The renderer contract: a simulated episode plus real reference frames in, one photographic mp4 per camera out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import numpy as np

from datafarm.errors import BadInput
from datafarm.render.appearance import Appearance
from datafarm.render.contract import RenderContract
from datafarm.sim.recorder import RecordedEpisode


class RenderError(BadInput, RuntimeError):
    """A render could not be made from these inputs (the message says which input and why)."""


GENERATION_FILE = "generation.json"


class Renderer(ABC):
    """Turns a simulated episode into photographic video for all of its cameras in one call.

    Contract of `render`:
    - inputs: the workspace's render contract (datafarm.render.contract; its cameras must be the episode's;
      what else a backend takes from it is its own: prompts, control, seed for wan-vace); the recorded sim
      episode (per camera RGB, depth, segmentation with its legend, extrinsics);
      `references`: real RGB frames (H, W, 3) uint8 per camera from the calibration episode, keyed
      "head", "left_wrist", "right_wrist"; for the head camera `references["head"][0]` is the
      background plate (a view of the real scene, ideally without the arms in the way); the
      `appearance` to apply (tablecloth, light); an `output_dir` (created if missing).
    - outputs: one H.264 mp4 per camera of the episode, `output_dir / "<camera>.mp4"`, each with the
      same frame count, frame size and fps as the sim episode, frame t showing sim frame t; the
      mapping camera -> path is returned. All views are produced together (one canvas per time step)
      so they stay consistent with each other.
    - a generative backend (a video model) also writes `output_dir / GENERATION_FILE`:
      {"renderer": name, "seams": [the first newly generated frame of each chunk after the first]}; the
      review then runs the checks only generated video needs (datafarm.review.generated).
    - failure: `RenderError` naming the missing or malformed input; no partial mp4 is left under a
      final name.
    """

    name: ClassVar[str]

    @abstractmethod
    def render(self, episode: RecordedEpisode, references: dict[str, list[np.ndarray]], appearance: Appearance,
               output_dir: Path, contract: RenderContract | None = None) -> dict[str, Path]:
        """Render every camera of `episode`; see the class docstring for the contract."""


def check_contract_cameras(episode: RecordedEpisode, contract: RenderContract | None) -> None:
    """RenderError if the render contract names a camera the episode does not have."""
    missing = [camera for camera in (contract.cameras if contract else []) if camera not in episode.cameras]
    if missing:
        raise RenderError(f"the render contract names camera(s) {missing} that episode {episode.directory} lacks "
                          f"(it has {episode.cameras}); rerun the contract phase")


def check_references(episode: RecordedEpisode, references: dict[str, list[np.ndarray]]) -> None:
    """Raise RenderError unless every camera of the episode has at least one (H, W, 3) uint8 reference frame."""
    missing = [camera for camera in episode.cameras if not references.get(camera)]
    if missing:
        raise RenderError(f"no reference frames for camera(s) {missing}; got references for {sorted(references)}")
    for camera in episode.cameras:
        for index, frame in enumerate(references[camera]):
            frame = np.asarray(frame)
            if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8 or min(frame.shape[:2]) < 8:
                raise RenderError(f"reference {camera}[{index}] must be an (H, W, 3) uint8 image, "
                                  f"got {frame.shape} {frame.dtype}")
