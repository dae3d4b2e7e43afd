"""Hidden judge for lift_teapot: the teapot is up off the table, held by its handle (not its body).

The trace records no contacts, so "the fingers are on the handle" is read from where the holding
gripper is: its TCP inside the handle's region of the teapot's frame (outside the body, lid, knob
and spout), its fingers closed on something that thin, at every step of the final window."""

import numpy as np

from datafarm.task.verdict import Verdict

GRIPPER_AXIS = {0: 6, 1: 13}  # trace.tcp row (left, right) -> its gripper opening in trace.qpos


def _tcp_in_teapot_frame(trace) -> np.ndarray:
    """(T, 2, 3) each TCP's position in the teapot's frame (origin: its bottom centre)."""
    poses = trace.poses["teapot"]
    offset = trace.tcp - poses[:, None, :3, 3]
    return np.einsum("tji,tsj->tsi", poses[:, :3, :3], offset)  # R^T (p - o)


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    bottom = trace.position("teapot")[:, 2]
    rise = bottom[window] - bottom[0]  # the teapot starts standing on the table
    local = _tcp_in_teapot_frame(trace)[window]
    region = params["handle_region"]
    inside = np.ones(local.shape[:2], dtype=bool)
    for axis, name in enumerate("xyz"):
        low, high = region[name]
        inside &= (local[:, :, axis] > low) & (local[:, :, axis] < high)
    closed = np.column_stack([trace.qpos[window, GRIPPER_AXIS[side]] < params["max_grip_opening"] for side in (0, 1)])
    on_handle = (inside & closed).any(axis=1)  # at every step some gripper is closed on the handle
    nearest = np.linalg.norm(local - np.asarray(params["handle_grip"]), axis=2).min(axis=1)
    checks = {
        "lifted": bool(len(rise) and np.all(rise > params["min_rise"])),
        "held_by_handle": bool(len(on_handle) and np.all(on_handle)),
    }
    values = {"min_rise_m": float(rise.min()) if len(rise) else np.nan,
              "tcp_from_handle_m": float(nearest.max()) if len(nearest) else np.nan}
    return Verdict.from_checks(checks, values)
