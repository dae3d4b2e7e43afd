"""Hidden judge for strike_drum: at least two distinct impacts on the drum head, the drum unmoved."""

import numpy as np

from datafarm.task.verdict import Verdict


def impact_onsets(time, impulse, contact, threshold, min_gap):
    """Times at which a distinct impact starts: the robot's impulse on the head (N s per control
    step) exceeds `threshold` while the head was free of robot contact for the `min_gap` seconds
    before. A long press (a gripper resting on the head) is one impact at most."""
    onsets, last_contact = [], -np.inf
    for t, j, touching in zip(time, impulse, contact):
        if j > threshold and t - last_contact > min_gap:
            onsets.append(float(t))
        if touching or j > 0:
            last_contact = t
    return onsets


def judge(trace, params):
    time = trace.time
    impulse = trace.fixture("drum", "impulse")
    contact = trace.fixture("drum", "contact") > 0.5
    onsets = impact_onsets(time, impulse, contact, params["impulse_threshold"], params["min_gap_seconds"])
    # The drum must take the hits where it stands: not shoved along the table, not knocked over.
    xy = np.stack([trace.fixture("drum", "x"), trace.fixture("drum", "y")], axis=1)
    slide = float(np.linalg.norm(xy - xy[0], axis=1).max())
    tilt = float(np.rad2deg(trace.fixture("drum", "tilt")).max())
    checks = {
        "struck_enough": len(onsets) >= params["required_impacts"],
        "drum_stayed_put": slide < params["max_slide"],
        "drum_upright": tilt < params["max_tilt_deg"],
    }
    values = {"impacts": len(onsets), "first_impact_s": onsets[0] if onsets else -1.0,
              "peak_impulse_Ns": float(impulse.max()), "slide_m": slide, "tilt_deg": tilt}
    return Verdict.from_checks(checks, values)
