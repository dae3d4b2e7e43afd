"""Hidden judge for block_in_drawer: the block ends up resting inside the drawer, and the drawer is shut."""

import numpy as np

from datafarm.task.verdict import Verdict


def _in_drawer_frame(trace) -> np.ndarray:
    """(T, 3) the block's centre relative to the centre of the drawer's inside bottom, in the drawer's
    axes (x across the front, y into the cabinet, z up)."""
    interior = np.column_stack([trace.fixture("drawer", c) for c in ("interior_x", "interior_y", "interior_z")])
    offset = trace.center("block") - interior
    yaw = trace.fixture("drawer", "yaw")
    cos, sin = np.cos(yaw), np.sin(yaw)
    return np.column_stack([cos * offset[:, 0] + sin * offset[:, 1], -sin * offset[:, 0] + cos * offset[:, 1], offset[:, 2]])


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    relative = _in_drawer_frame(trace)
    half_width, half_depth = np.asarray(params["drawer_inner_size"]) / 2 - params["inside_margin"]
    half_height = trace.heights["block"] / 2
    within_footprint = (np.abs(relative[:, 0]) < half_width) & (np.abs(relative[:, 1]) < half_depth)
    # Resting on the bottom: the centre half a block above it (not perched on a wall, not below it).
    above_bottom = relative[:, 2] - half_height
    resting = (above_bottom > -0.005) & (above_bottom < params["resting_tolerance"])
    opening = trace.fixture("drawer", "opening")
    checks = {
        "started_outside": bool(not (within_footprint[0] and resting[0])),
        "block_in_drawer": bool(np.all(within_footprint[window])),
        "block_on_drawer_bottom": bool(np.all(resting[window])),
        "drawer_shut": bool(np.all(opening[window] < params["closed_opening"])),
        "drawer_was_open": bool(opening[0] > 2 * params["closed_opening"]),
    }
    values = {"final_opening_m": float(opening[-1]),
              "block_offset_x_m": float(np.abs(relative[window, 0]).max()),
              "block_offset_y_m": float(np.abs(relative[window, 1]).max()),
              "block_above_bottom_m": float(above_bottom[window].max())}
    return Verdict.from_checks(checks, values)
