"""Hidden judge for nest_cups: medium inside big, small inside medium, all upright, let go, for the
final window; and the cups started apart."""

import numpy as np

from datafarm.task.verdict import Verdict


def _in_receiver_frame(trace, inner, outer) -> np.ndarray:
    """(T, 3) the inner cup's bottom centre in the outer cup's frame (origin: its bottom centre)."""
    outer_poses = trace.poses[outer]
    offset = trace.position(inner) - outer_poses[:, :3, 3]
    return np.einsum("tji,tj->ti", outer_poses[:, :3, :3], offset)  # R^T (p - o)


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    cups = params["cups"]
    radii = params["radii"]
    checks, values = {}, {}
    for outer, inner in zip(cups, cups[1:]):
        local = _in_receiver_frame(trace, inner, outer)[window]
        off_axis = np.hypot(local[:, 0], local[:, 1])
        # The inner cup's wall may touch the receiver's inner wall, no further.
        allowed = radii[outer] - params["wall"] - radii[inner] + params["centre_tolerance"]
        depth = trace.heights[outer] - local[:, 2]  # how far the inner bottom is below the rim
        checks[f"{inner}_in_{outer}"] = bool(len(local) and np.all(off_axis < allowed)
                                             and np.all(depth > params["min_depth"]) and np.all(local[:, 2] > -0.005))
        values[f"{inner}_off_axis_m"] = float(off_axis.max()) if len(local) else np.nan
        values[f"{inner}_depth_m"] = float(depth.min()) if len(local) else np.nan

    tilts = np.stack([trace.tilt(name)[window] for name in cups])
    checks["upright"] = bool(tilts.size and np.all(tilts < np.deg2rad(params["max_tilt_deg"])))
    values["max_tilt_deg"] = float(np.rad2deg(tilts.max())) if tilts.size else np.nan

    gap = min(float(trace.tcp_distance(name)[window].min()) for name in cups)
    checks["released"] = gap > params["release_distance"]
    values["tcp_gap_m"] = gap

    # At the start no cup was inside another: their bottoms stood apart on the table.
    start = {name: trace.position(name)[0] for name in cups}
    apart = min(np.hypot(*(start[a] - start[b])[:2]) - radii[a] - radii[b]
                for i, a in enumerate(cups) for b in cups[i + 1:])
    checks["started_apart"] = bool(apart > 0)
    values["start_gap_m"] = float(apart)
    return Verdict.from_checks(checks, values)
