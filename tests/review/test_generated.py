"""The checks only generated video needs, on block means made here: a jump at a chunk's seam, and the
static background's colour drifting over the episode (each with its negative control)."""

import numpy as np

from datafarm.review.generated import colour_drift, seam_jump, static_blocks
from datafarm.review.view_analysis import BLOCK


def moving_blocks(frames=60, seed=0):
    """Block means of a scene moving smoothly in its middle rows (a pattern sliding a little every frame, as
    a robot arm does at 30 fps) with codec-like noise; rows 0-3 and 8-11 hold still."""
    rng = np.random.default_rng(seed)
    blocks = np.full((frames, 12, 16, 3), 100.0) + rng.normal(0, 0.8, (frames, 12, 16, 3))
    columns = np.arange(16)
    for t in range(frames):
        blocks[t, 4:8] += 30 * np.sin(0.5 * columns + 0.2 * t)[None, :, None]
    return blocks


def test_a_jump_at_a_seam_is_caught_and_motion_is_not():
    smooth = moving_blocks()
    assert seam_jump(smooth, [20, 40]) < 2.0
    jumped = smooth.copy()
    jumped[40:] += 25  # the second chunk came out brighter
    assert seam_jump(jumped, [20, 40]) > 4.0
    assert seam_jump(jumped, [20]) < 2.0  # the jump is not at a seam listed: not this check's business
    assert seam_jump(smooth, []) is None


def test_the_static_background_drifting_is_caught():
    classes = np.zeros((60, 12 * BLOCK, 16 * BLOCK), np.uint8)  # table/floor everywhere ...
    classes[:, 4 * BLOCK:8 * BLOCK] = 3  # ... but the rows where something moves
    static = static_blocks(classes)
    assert static.shape == (12, 16) and static[0].all() and not static[5].any()
    steady = moving_blocks()
    assert colour_drift(steady, static) < 1.0
    drifting = steady + np.linspace(0, 30, len(steady))[:, None, None, None] * np.array([1.0, 0.6, 0.2])
    assert colour_drift(drifting, static) > 20.0
    assert colour_drift(steady, np.zeros_like(static)) is None  # nothing static: not applicable
