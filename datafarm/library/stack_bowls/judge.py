"""Hidden judge for stack_bowls: the small bowl lies level on the big bowl's floor, inside its
wall, let go, for the final window; and the bowls started apart."""

import numpy as np

from datafarm.task.verdict import Verdict


def _in_receiver_frame(trace, inner, outer) -> np.ndarray:
    """(T, 3) the inner bowl's bottom centre in the outer bowl's frame (origin: its bottom centre)."""
    outer_poses = trace.poses[outer]
    offset = trace.position(inner) - outer_poses[:, :3, 3]
    return np.einsum("tji,tj->ti", outer_poses[:, :3, :3], offset)  # R^T (p - o)


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    outer, inner = params["bowls"]
    radii, wall = params["radii"], params["wall"]
    local = _in_receiver_frame(trace, inner, outer)[window]
    off_axis = np.hypot(local[:, 0], local[:, 1])
    allowed = radii[outer] - wall - radii[inner] + params["centre_tolerance"]
    # Seated: the inner bottom on the outer bowl's floor (its top is `wall` above the origin).
    seat = local[:, 2] - wall
    # Level in the receiver: the angle between the two bowls' axes.
    axes = np.einsum("ti,ti->t", trace.poses[inner][window, :3, 2], trace.poses[outer][window, :3, 2])
    relative_tilt = np.arccos(np.clip(axes, -1.0, 1.0))
    gap = trace.tcp_distance(inner)[window]
    start = {name: trace.position(name)[0] for name in (outer, inner)}
    apart = float(np.hypot(*(start[outer] - start[inner])[:2]) - radii[outer] - radii[inner])
    found = len(local) > 0
    checks = {
        "inside_wall": bool(found and np.all(off_axis < allowed)),
        "seated": bool(found and np.all(np.abs(seat) < params["seat_tolerance"])),
        "level": bool(found and np.all(relative_tilt < np.deg2rad(params["max_relative_tilt_deg"]))),
        "receiver_upright": bool(found and np.all(trace.tilt(outer)[window] < np.deg2rad(params["max_tilt_deg"]))),
        "released": bool(found and gap.min() > params["release_distance"]),
        "started_apart": apart > 0,
    }
    values = {
        "off_axis_m": float(off_axis.max()) if found else np.nan,
        "seat_m": float(np.abs(seat).max()) if found else np.nan,
        "relative_tilt_deg": float(np.rad2deg(relative_tilt.max())) if found else np.nan,
        "tcp_gap_m": float(gap.min()) if found else np.nan,
        "start_gap_m": apart,
    }
    return Verdict.from_checks(checks, values)
