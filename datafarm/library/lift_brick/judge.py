"""Hidden judge for lift_brick: the brick is held up off the table, still, at the end."""

import numpy as np

from datafarm.task.verdict import Verdict


def _lowest_corner(trace, half_size) -> np.ndarray:
    """(T,) world z of the brick's lowest corner (a brick hanging askew counts by its lowest point)."""
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    local = signs * np.asarray(half_size) + [0.0, 0.0, half_size[2]]  # frame origin: bottom centre
    poses = trace.poses["brick"]
    heights = np.einsum("tj,cj->tc", poses[:, 2, :3], local) + poses[:, 2, 3][:, None]
    return heights.min(axis=1)


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    lowest = _lowest_corner(trace, params["half_size"])
    rise = lowest[window] - lowest[0]  # the brick starts lying on the table
    gap = trace.tcp_distance("brick")[window]
    centre = trace.center("brick")[window]
    dt = np.diff(trace.time[window])
    speed = np.linalg.norm(np.diff(centre, axis=0), axis=1) / np.maximum(dt, 1e-6) if len(centre) > 1 else np.zeros(1)
    checks = {
        "lifted": bool(len(rise) and np.all(rise > params["min_rise"])),
        "in_gripper": bool(len(gap) and np.all(gap < params["hold_distance"])),
        "held_still": bool(len(speed) and np.all(speed < params["max_speed"])),
    }
    values = {"min_rise_m": float(rise.min()) if len(rise) else np.nan,
              "tcp_gap_m": float(gap.max()) if len(gap) else np.nan,
              "max_speed_m_s": float(speed.max()) if len(speed) else np.nan}
    return Verdict.from_checks(checks, values)
