"""Does the robot in a rendered view sit where the sim put it? Mask IoU against a background estimate.

The renderer may change every colour (a generative one certainly does), so the rendered robot cannot
be found by colour. What must hold is geometry: where the sim shows table or floor, the rendered view
shows the same surface whatever it looks like. So for frame t the background behind each pixel is
estimated from OTHER rendered frames t': the pixel's ray is cut with the table plane (and the floor
plane), the point is projected into frame t', and the rendered colour there is taken if the sim says
that spot is unoccluded table (or floor) at t' (class and depth agree). This works for static and
moving cameras alike. Pixels that differ clearly from their background estimate are the estimated
robot mask, compared with the sim's robot mask. All of it on BLOCK x BLOCK block means, so texture
detail, small misregistration and compression noise do not matter; blocks showing task objects or
half robot / half background are left out.

"Differ clearly" is calibrated per view, not fixed: a robot may be rendered in nearly the table's or
floor's colour (a grey gripper on grey concrete differs by ~10 levels), which a fixed level of 30 misses
entirely (IoU 0.02 on a correct render). So the error of the background estimate itself is measured on
the blocks the sim says are unoccluded table / floor (robot and object fraction 0), and a block counts as
robot when it differs by more than `noise_factor` x the 99th percentile of that error, clipped to
[`min_level`, `max_level`]. On good renders that error is a few levels (codec noise), so faint robots are
found; where the estimate is poor, or the render disagrees with the sim (shifted, reversed: robot
pixels land on sim background), the percentile is large and the level stays at `max_level`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from datafarm.render.color import apply_matrix
from datafarm.render.views import BACKGROUND, OBJECT, ROBOT, TABLE, plane_points
from datafarm.review.view_analysis import BLOCK, SimView

_DEPTH_TOLERANCE_M = 0.03
_DEPTH_TOLERANCE_REL = 0.03
_MIN_UNION_BLOCKS = 20
_MIN_NOISE_BLOCKS = 200  # fewer background blocks than this: no calibration, the level stays at max_level
_NOISE_PERCENTILE = 99.0


@dataclass(frozen=True)
class MaskAgreement:
    iou: float | None  # None when too little robot was visible against estimable background
    union_blocks: int
    frames: int
    level: float = float("nan")  # the difference level used: a block differing more is estimated robot
    background_error: float | None = None  # 99th percentile |render - estimate| on sim background blocks


def _block_fraction(mask: np.ndarray) -> np.ndarray:
    height, width = (mask.shape[-2] // BLOCK) * BLOCK, (mask.shape[-1] // BLOCK) * BLOCK
    mask = mask[..., :height, :width].astype(np.float32)
    return mask.reshape(*mask.shape[:-2], height // BLOCK, BLOCK, width // BLOCK, BLOCK).mean(axis=(-3, -1))


def _block_rays(sim: SimView) -> tuple[np.ndarray, int, int]:
    rows, cols = sim.height // BLOCK, sim.width // BLOCK
    v, u = (np.mgrid[0:rows, 0:cols] * BLOCK + BLOCK / 2).astype(np.float32)
    pixels = np.stack([u, v, np.ones_like(u)], axis=-1).reshape(-1, 3)
    return apply_matrix(pixels, np.linalg.inv(sim.intrinsics)), rows, cols


def robot_mask_agreement(sim: SimView, blocks: np.ndarray, depth: dict[int, np.ndarray],
                         planes: list[tuple[float, int]], eval_frames: list[int], ref_frames: list[int],
                         max_level: float, min_level: float | None = None,
                         noise_factor: float = 2.0) -> MaskAgreement:
    """IoU (summed over `eval_frames`) of the estimated vs simulated robot mask, in blocks.

    `blocks`: rendered block means (T, rows, cols, 3); `depth`: sim depth (H, W) in metres for every
    reference frame; `planes`: (height m, class) pairs, the table and floor planes. A block is estimated
    robot when it differs from its background estimate by more than `noise_factor` x the measured
    background-estimate error, clipped to [`min_level`, `max_level`] (`min_level` None: fixed `max_level`).
    """
    rays, rows, cols = _block_rays(sim)
    refs = {}
    for t in ref_frames:
        fractions = {c: _block_fraction(sim.classes[t] == c) for c in (TABLE, BACKGROUND)}
        refs[t] = (fractions, _block_fraction(depth[t]))
    measured = []  # per eval frame: (difference, estimable, robot fraction, object fraction)
    for t in eval_frames:
        samples = []
        for height, plane_class in planes:
            xy, hit = plane_points(rays, sim.extrinsics[t], height)
            world = np.concatenate([xy, np.full((len(xy), 1), height, np.float32)], axis=1)
            for ref in ref_frames:
                if ref == t:
                    continue
                fractions, ref_depth = refs[ref]
                rotation, translation = sim.extrinsics[ref][:3, :3], sim.extrinsics[ref][:3, 3]
                camera = apply_matrix(world, rotation) + translation.astype(np.float32)
                z = camera[:, 2]
                with np.errstate(divide="ignore", invalid="ignore"):
                    u = sim.intrinsics[0, 0] * camera[:, 0] / z + sim.intrinsics[0, 2]
                    v = sim.intrinsics[1, 1] * camera[:, 1] / z + sim.intrinsics[1, 2]
                inside = hit & (z > 0) & np.isfinite(u) & np.isfinite(v)
                inside &= (u >= 0) & (v >= 0) & (u < cols * BLOCK) & (v < rows * BLOCK)
                j = (np.where(inside, u, 0) // BLOCK).astype(int)  # NaN outside: never divided
                i = (np.where(inside, v, 0) // BLOCK).astype(int)
                valid = inside & (fractions[plane_class][i, j] == 1.0)
                valid &= np.abs(ref_depth[i, j] - z) < _DEPTH_TOLERANCE_M + _DEPTH_TOLERANCE_REL * np.abs(z)
                sample = np.where(valid[:, None], blocks[ref][i, j], np.nan)
                samples.append(sample)
        if not samples:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN blocks: no estimate, handled below
            background = np.nanmedian(np.stack(samples), axis=0)
        estimable = np.isfinite(background).all(axis=1).reshape(rows, cols)
        difference = np.abs(blocks[t].reshape(-1, 3) - background).max(axis=1).reshape(rows, cols)
        measured.append((difference, estimable, _block_fraction(sim.classes[t] == ROBOT),
                         _block_fraction(sim.classes[t] == OBJECT)))
    level, background_error = _difference_level(measured, max_level, min_level, noise_factor)
    intersection = union = 0
    for difference, estimable, robot, objects in measured:
        estimated = estimable & (difference > level)
        considered = estimable & (objects == 0) & ((robot <= 0.2) | (robot >= 0.8))
        simulated = robot >= 0.8
        intersection += int((estimated & simulated & considered).sum())
        union += int(((estimated | simulated) & considered).sum())
    iou = intersection / union if union >= _MIN_UNION_BLOCKS else None
    return MaskAgreement(iou, union, len(eval_frames), level, background_error)


def _difference_level(measured: list, max_level: float, min_level: float | None,
                      noise_factor: float) -> tuple[float, float | None]:
    """The robot difference level of a view, from its background-estimate error; and that error."""
    errors = [difference[estimable & (robot == 0) & (objects == 0)]
              for difference, estimable, robot, objects in measured]
    errors = np.concatenate(errors) if errors else np.zeros(0, np.float32)
    if len(errors) < _MIN_NOISE_BLOCKS:
        return float(max_level), None
    background_error = float(np.percentile(errors, _NOISE_PERCENTILE))
    if min_level is None:
        return float(max_level), background_error
    return float(np.clip(noise_factor * background_error, min_level, max_level)), background_error
