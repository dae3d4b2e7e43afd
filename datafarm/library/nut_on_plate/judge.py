"""Hidden judge for nut_on_plate: the nut lies flat on the plate, within its radius, let go."""

import numpy as np

from datafarm.task.verdict import Verdict


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    nut, plate = trace.position("nut"), trace.position("plate")
    off_centre = np.hypot(*(nut[:, :2] - plate[:, :2]).T)
    plate_top = plate[:, 2] + params["plate_height"] * trace.poses["plate"][:, 2, 2]
    above_top = nut[:, 2] - plate_top  # the nut's bottom centre over the plate's top
    tilt = trace.tilt("nut")[window]
    gap = trace.tcp_distance("nut")[window]
    within = params["plate_radius"] - params["nut_half_across_flats"]
    checks = {
        "within_plate": bool(len(tilt) and np.all(off_centre[window] < within)),
        "on_plate_top": bool(len(tilt) and np.all(np.abs(above_top[window]) < params["height_tolerance"])),
        "flat": bool(len(tilt) and np.all(tilt < np.deg2rad(params["max_tilt_deg"]))),
        "released": bool(len(gap) and gap.min() > params["release_distance"]),
        "started_off_plate": bool(off_centre[0] > params["plate_radius"]),
    }
    values = {
        "off_centre_m": float(off_centre[window].max()) if len(tilt) else np.nan,
        "height_above_plate_m": float(np.abs(above_top[window]).max()) if len(tilt) else np.nan,
        "max_tilt_deg": float(np.rad2deg(tilt.max())) if len(tilt) else np.nan,
        "tcp_gap_m": float(gap.min()) if len(gap) else np.nan,
    }
    return Verdict.from_checks(checks, values)
