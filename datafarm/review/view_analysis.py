"""One decoding pass over a rendered view, measuring what the review checks need, against the sim view."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from datafarm.render.color import luminance
from datafarm.media import iter_frames
from datafarm.render.views import TABLE, still_camera_steps
from datafarm.review.report import ReviewThresholds

BLOCK = 4  # the robot-mask check works on BLOCK x BLOCK means: robust to texture and compression


@dataclass
class SimView:
    """The sim side of one camera: classes (T, H, W) uint8, segmentation ids, extrinsics, intrinsics."""

    camera: str
    classes: np.ndarray
    segmentation: np.ndarray
    extrinsics: np.ndarray
    intrinsics: np.ndarray
    width: int
    height: int


@dataclass
class ViewMeasures:
    """What one pass over a rendered view measured."""

    decoded: bool = True
    error: str = ""
    frames: int = 0
    size_ok: bool = True
    size: tuple[int, int] = (0, 0)
    black_frames: int = 0
    blank_frames: int = 0
    longest_frozen: int = 0
    flicker: float | None = None  # None: no static background seen by a still camera
    blocks: np.ndarray | None = None  # (T, H / BLOCK, W / BLOCK, 3) float32 block means (sRGB levels)
    notes: list[str] = field(default_factory=list)


def static_background_mask(classes: np.ndarray, margin: int = 3) -> np.ndarray:
    """(H, W) pixels that are table or background in every frame, at least `margin` px from anything else."""
    moving = ~(classes <= TABLE).all(axis=0)  # BACKGROUND = 0, TABLE = 1
    grown = moving.copy()
    for _ in range(margin):  # grow by one pixel in 4 directions per pass
        grown[1:] |= grown[:-1].copy()
        grown[:-1] |= grown[1:].copy()
        grown[:, 1:] |= grown[:, :-1].copy()
        grown[:, :-1] |= grown[:, 1:].copy()
    return ~grown


def block_means(frame: np.ndarray) -> np.ndarray:
    height, width = (frame.shape[0] // BLOCK) * BLOCK, (frame.shape[1] // BLOCK) * BLOCK
    cropped = frame[:height, :width].astype(np.float32)
    return cropped.reshape(height // BLOCK, BLOCK, width // BLOCK, BLOCK, 3).mean(axis=(1, 3))


def analyse_view(path, sim: SimView, thresholds: ReviewThresholds) -> ViewMeasures:
    """Decode `path` once; count black, blank and frozen frames, measure flicker, keep block means."""
    measures = ViewMeasures()
    sim_frames = len(sim.classes)
    still = still_camera_steps(sim.extrinsics)
    static = static_background_mask(sim.classes)
    use_static = static.mean() > 0.01 and still.any()
    blocks, flicker_steps, frozen_run = [], [], 0
    previous = previous_luma = None
    try:
        for t, frame in enumerate(iter_frames(path)):
            measures.frames += 1
            if frame.shape[:2] != (sim.height, sim.width):
                measures.size_ok, measures.size = False, (frame.shape[1], frame.shape[0])
                continue
            luma = luminance(frame.astype(np.float32))
            mean, spread = float(luma.mean()), float(luma.std())
            if np.isfinite(mean) and mean < thresholds.black_level:
                measures.black_frames += 1
            elif not np.isfinite(mean) or spread < thresholds.uniform_level:
                measures.blank_frames += 1
            blocks.append(block_means(frame))
            if previous is not None and t < sim_frames:
                changed = sim.segmentation[t] != sim.segmentation[t - 1]
                if changed.mean() >= thresholds.min_sim_change:
                    difference = np.abs(frame[changed].astype(np.int16) - previous[changed].astype(np.int16))
                    frozen_run = frozen_run + 1 if difference.mean() < thresholds.frozen_level else 0
                    measures.longest_frozen = max(measures.longest_frozen, frozen_run)
                else:
                    frozen_run = 0
                if use_static and still[t - 1]:
                    flicker_steps.append(float(np.abs(luma[static] - previous_luma[static]).mean()))
            previous, previous_luma = frame, luma
    except ValueError as error:
        measures.decoded, measures.error = False, str(error)
        return measures
    if measures.frames == 0:
        measures.decoded, measures.error = False, f"{path} has no frames"
        return measures
    if blocks:
        measures.blocks = np.stack(blocks)
    if flicker_steps:
        measures.flicker = float(np.mean(flicker_steps))
    return measures
