"""Hidden judge for apple_on_scale: the scale reads the apple while the apple rests on the plate."""

import numpy as np

from datafarm.task.verdict import Verdict


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    reading = trace.fixture("scale", "reading_kg")[window]
    apple = trace.center("apple")[window]
    plate = trace.fixture("scale", "plate_x")[window], trace.fixture("scale", "plate_y")[window]
    plate_z = trace.fixture("scale", "plate_z")[window]
    mass = params["apple_mass"]
    off_centre = np.hypot(apple[:, 0] - plate[0], apple[:, 1] - plate[1])
    radius = trace.heights["apple"] / 2
    height_above_plate = apple[:, 2] - radius - plate_z
    checks = {
        "apple_on_plate": bool(np.all(off_centre < params["plate_margin"]) and np.all(np.abs(height_above_plate) < 0.01)),
        "scale_reads_apple": bool(np.all(np.abs(reading - mass) < params["reading_tolerance"] * mass)),
        "released": bool(np.all(trace.tcp_distance("apple")[window] > 0.06)),
        "came_from_table": bool(trace.center("apple")[0, 2] < plate_z[0]),
    }
    values = {"reading_kg": float(np.median(reading)), "apple_kg": mass,
              "off_centre_m": float(off_centre.max()), "height_above_plate_m": float(np.abs(height_above_plate).max())}
    return Verdict.from_checks(checks, values)
