"""Hidden judge for pick_screw: the screw is lifted off the table and held, for the final window."""

import numpy as np

from datafarm.task.verdict import Verdict


def judge(trace, params):
    window = trace.last(params["settle_seconds"])
    centre = trace.center("screw")
    rise = centre[window, 2] - centre[0, 2]
    held = trace.tcp_distance("screw")[window]
    checks = {
        "lifted": bool(len(rise) and np.all(rise > params["min_lift"])),
        # In the fingers, not thrown up or lying on something: a TCP stays at the screw.
        "held": bool(len(held) and np.all(held < params["hold_distance"])),
    }
    values = {"min_rise_m": float(rise.min()) if len(rise) else np.nan,
              "max_tcp_gap_m": float(held.max()) if len(held) else np.nan}
    return Verdict.from_checks(checks, values)
