"""The checks only generated video needs, on block means made here: a jump at a chunk's seam, the static
background's colour drifting over the episode, and edges away from the sim's outlines (each with its
negative control)."""

import numpy as np

from datafarm.render.views import OBJECT, ROBOT
from datafarm.review.generated import colour_drift, edge_agreement, seam_jump, static_blocks
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


def test_edges_away_from_the_sim_outlines_are_caught_on_a_checked_tablecloth():
    rng = np.random.default_rng(0)
    classes = np.ones((20, 24 * BLOCK, 32 * BLOCK), np.uint8)  # table ...
    classes[:, 6 * BLOCK + 2: 14 * BLOCK + 2, 5 * BLOCK + 1: 12 * BLOCK + 1] = OBJECT  # ... a box, edges mid-block
    classes[:, 10 * BLOCK: 20 * BLOCK, 18 * BLOCK: 26 * BLOCK] = ROBOT
    v, u = np.mgrid[:24 * BLOCK, :32 * BLOCK]
    table = np.where((v // 6 + u // 6) % 2, 80.0, 170.0)  # a checked cloth: edges everywhere on the table
    image = np.where(classes[0] == OBJECT, 230.0, np.where(classes[0] == ROBOT, 20.0, table))
    frames = image[None, :, :, None].repeat(3, axis=3) + rng.normal(0, 2, (20, *image.shape, 3))
    blocks = frames.reshape(20, 24, BLOCK, 32, BLOCK, 3).mean(axis=(2, 4))
    assert edge_agreement(blocks, classes) > 0.9
    shifted = np.roll(blocks, (2, 2), axis=(1, 2))  # the scene drawn 8 px off where the sim has it
    assert edge_agreement(shifted, classes) < 0.6
    assert edge_agreement(blocks, np.ones_like(classes)) is None  # no robot or object: not applicable
