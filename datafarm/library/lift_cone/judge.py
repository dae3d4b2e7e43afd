"""Hidden judge for lift_cone: the cone is held up off the table, upright, at the end."""

import numpy as np

from datafarm.task.verdict import Verdict


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    bottom = trace.position("cone")[:, 2]
    rise = bottom[window] - bottom[0]  # the cone starts resting on the table
    tilt = trace.tilt("cone")[window]
    gap = trace.tcp_distance("cone")[window]
    checks = {
        "lifted": bool(len(rise) and np.all(rise > params["min_rise"])),
        "upright": bool(len(tilt) and np.all(tilt < np.deg2rad(params["max_tilt_deg"]))),
        "in_gripper": bool(len(gap) and np.all(gap < params["hold_distance"])),
    }
    values = {"min_rise_m": float(rise.min()) if len(rise) else np.nan,
              "max_tilt_deg": float(np.rad2deg(tilt.max())) if len(tilt) else np.nan,
              "tcp_gap_m": float(gap.max()) if len(gap) else np.nan}
    return Verdict.from_checks(checks, values)
