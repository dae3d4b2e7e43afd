"""Hidden judge for screw_in_basket: the screw lies inside the basket, below its rim, let go."""

import numpy as np

from datafarm.task.verdict import Verdict


def _screw_ends_in_basket(trace, params) -> np.ndarray:
    """(T, 2, 3) the screw's two axis end points (head, tip) in the basket's frame (origin: its
    bottom centre)."""
    screw, basket = trace.poses["screw"], trace.poses["basket"]
    half, height = params["screw_half_length"], params["screw_axis_height"]
    local_ends = np.array([[-half, 0.0, height, 1.0], [half, 0.0, height, 1.0]])
    world = np.einsum("tij,kj->tki", screw, local_ends)[..., :3]  # (T, 2, 3)
    offset = world - basket[:, None, :3, 3]
    return np.einsum("tji,tkj->tki", basket[:, :3, :3], offset)  # R^T (p - o)


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    ends = _screw_ends_in_basket(trace, params)
    inner_x, inner_y = params["inner_half"]
    now = ends[window]
    inside = (np.abs(now[..., 0]) < inner_x) & (np.abs(now[..., 1]) < inner_y)
    below_rim = (now[..., 2] < params["rim_height"] - params["rim_margin"]) & (now[..., 2] > 0.0)
    centre = trace.center("screw")[window]
    motion = float(np.linalg.norm(centre - centre[0], axis=1).max()) if len(centre) else np.nan
    gap = trace.tcp_distance("screw")[window]
    basket_tilt = trace.tilt("basket")[window]
    start = ends[0]
    checks = {
        "inside_walls": bool(inside.size and inside.all()),
        "below_rim": bool(below_rim.size and below_rim.all()),
        "at_rest": bool(motion < params["max_motion"]),
        "released": bool(len(gap) and gap.min() > params["release_distance"]),
        "basket_flat": bool(len(basket_tilt) and np.all(basket_tilt < np.deg2rad(params["max_basket_tilt_deg"]))),
        "started_outside": bool(np.any((np.abs(start[:, 0]) > inner_x) | (np.abs(start[:, 1]) > inner_y))),
    }
    values = {
        "max_end_height_m": float(now[..., 2].max()) if now.size else np.nan,
        "max_end_x_m": float(np.abs(now[..., 0]).max()) if now.size else np.nan,
        "max_end_y_m": float(np.abs(now[..., 1]).max()) if now.size else np.nan,
        "motion_m": motion,
        "tcp_gap_m": float(gap.min()) if len(gap) else np.nan,
    }
    return Verdict.from_checks(checks, values)
