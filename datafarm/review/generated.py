"""Checks only a generated video needs: a video model renders long episodes in chunks one after another,
and can jump at a chunk's seam or let the scene's colours drift over the episode. The composite renderer
pastes sim pixels over a fixed plate and does neither, so these run only on views a generative renderer
marked (its ``generation.json`` beside the videos, listing the seams).

Both work on the block means the review's one decoding pass keeps (view_analysis.BLOCK), so they cost no
second decode:

- seam jump: the mean |change| of the blocks from the frame before a seam to the seam's first frame,
  over the median change of the frames around it (motion is in both, a seam's jump only in the first);
- colour drift: the RGB distance between the static background's mean colour over the first and the last
  frames, for a still camera (the sim says which blocks show table or floor only, all episode long).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from datafarm.render.base import GENERATION_FILE
from datafarm.review.view_analysis import BLOCK, static_background_mask
SEAM_WINDOW = 4  # frame changes on each side of a seam that make its baseline
DRIFT_SPAN = 8  # frames averaged at each end for the colour drift
MIN_CHANGE = 0.5  # levels: the baseline of a still scene (codec noise) is at least this


def read_seams(render_dir: Path) -> list[int] | None:
    """The seams a generative renderer recorded for the views in `render_dir`; None for a non-generated render."""
    path = Path(render_dir) / GENERATION_FILE
    if not path.is_file():
        return None
    return [int(s) for s in json.loads(path.read_text()).get("seams", [])]


def seam_jump(blocks: np.ndarray, seams: list[int], window: int = SEAM_WINDOW) -> float | None:
    """The largest ratio, over the seams, of the change into a seam's first frame to the median change around it."""
    changes = np.abs(np.diff(blocks.astype(np.float32), axis=0)).mean(axis=(1, 2, 3))  # [t-1]: frame t-1 -> t
    ratios = []
    for seam in seams:
        if not 1 <= seam < len(blocks):
            continue
        around = [changes[i] for i in range(max(0, seam - 1 - window), min(len(changes), seam + window))
                  if i != seam - 1]
        if around:
            ratios.append(float(changes[seam - 1] / max(float(np.median(around)), MIN_CHANGE)))
    return max(ratios) if ratios else None


def static_blocks(classes: np.ndarray) -> np.ndarray:
    """(H / BLOCK, W / BLOCK) blocks whose pixels all show table or floor in every sim frame."""
    static = static_background_mask(classes)
    height, width = (static.shape[0] // BLOCK) * BLOCK, (static.shape[1] // BLOCK) * BLOCK
    return static[:height, :width].reshape(height // BLOCK, BLOCK, width // BLOCK, BLOCK).all(axis=(1, 3))


def colour_drift(blocks: np.ndarray, static: np.ndarray, span: int = DRIFT_SPAN) -> float | None:
    """RGB distance (levels) of the static blocks' mean colour, first `span` frames against the last; None
    when the view has no static block or too few frames."""
    if not static.any() or len(blocks) < 2 * span:
        return None
    first = blocks[:span][:, static].reshape(-1, 3).mean(axis=0)
    last = blocks[-span:][:, static].reshape(-1, 3).mean(axis=0)
    return float(np.linalg.norm(first - last))
