"""Checks only a generated video needs: a video model renders long episodes in chunks one after another,
and can jump at a chunk's seam, let the scene's colours drift over the episode, or draw the robot and
objects where the sim did not. The composite renderer pastes sim pixels over a fixed plate and does none
of these, so these checks run only on views a generative renderer marked (its ``generation.json`` beside
the videos, listing the seams).

All work on the block means the review's one decoding pass keeps (view_analysis.BLOCK), so they cost no
second decode:

- seam jump: the mean |change| of the blocks from the frame before a seam to the seam's first frame,
  over the median change of the frames around it (motion is in both, a seam's jump only in the first);
- colour drift: the RGB distance between the static background's mean colour over the first and the last
  frames, for a still camera (the sim says which blocks show table or floor only, all episode long);
- edge agreement: whether the video's edges are where the sim's robot and objects have theirs. Over a few
  frames, the chance that a block the sim's robot or object outline crosses has a stronger luma gradient
  than a block inside the robot or an object (the area under the ROC curve: 0.5 is chance). The table's
  inside is left out: a checked tablecloth is all edges. A video that moved the robot, shifted the scene
  or dissolved an object loses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.ndimage import maximum_filter, minimum_filter
from scipy.stats import rankdata

from datafarm.render.base import GENERATION_FILE
from datafarm.render.color import luminance
from datafarm.render.views import TABLE
from datafarm.review.view_analysis import BLOCK, static_background_mask

SEAM_WINDOW = 4  # frame changes on each side of a seam that make its baseline
DRIFT_SPAN = 8  # frames averaged at each end for the colour drift
MIN_CHANGE = 0.5  # levels: the baseline of a still scene (codec noise) is at least this
EDGE_FRAMES = 12  # frames sampled for the edge agreement
MIN_OUTLINE_BLOCKS = 20  # fewer outline blocks than this over those frames: not applicable


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


def _block_classes(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per BLOCK x BLOCK block of (H, W) classes: whether a robot or object outline crosses it, and whether
    it lies inside the robot or an object (it and its 8 neighbours hold that class only)."""
    height, width = (classes.shape[0] // BLOCK) * BLOCK, (classes.shape[1] // BLOCK) * BLOCK
    cells = classes[:height, :width].reshape(height // BLOCK, BLOCK, width // BLOCK, BLOCK).transpose(0, 2, 1, 3)
    low, high = cells.min(axis=(2, 3)), cells.max(axis=(2, 3))
    outline = (low != high) & (high > TABLE)
    # inside: the 3x3 blocks around hold one class (beyond the border counts as another)
    inside = minimum_filter(low, 3, mode="constant", cval=0) == maximum_filter(high, 3, mode="constant", cval=255)
    return outline, inside & (low > TABLE)


def edge_agreement(blocks: np.ndarray, classes: np.ndarray, frames: int = EDGE_FRAMES) -> float | None:
    """AUC (module docstring) of the video's block luma gradient, sim outline blocks against interior blocks,
    over `frames` evenly spaced frames; None when the sim shows too little robot or object outline."""
    count = min(len(blocks), len(classes))
    outline_values, interior_values = [], []
    for t in np.unique(np.linspace(0, count - 1, min(frames, count)).round().astype(int)):
        outline, interior = _block_classes(classes[t])
        luma = luminance(blocks[t][:outline.shape[0], :outline.shape[1]].astype(np.float32))
        dv, du = np.gradient(luma)
        gradient = np.hypot(dv, du)
        outline_values.append(gradient[outline])
        interior_values.append(gradient[interior])
    positive, negative = np.concatenate(outline_values), np.concatenate(interior_values)
    if len(positive) < MIN_OUTLINE_BLOCKS or not len(negative):
        return None
    return _auc(positive, negative)


def _auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive value > a negative one), ties counting half: the Mann-Whitney U over the pair count."""
    ranks = rankdata(np.concatenate([positive, negative]))  # ties share their mean rank
    u = ranks[:len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return float(u / (len(positive) * len(negative)))
