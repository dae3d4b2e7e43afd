"""Hidden judge for fold_towel: both folds happened, in order, and the towel ends folded in quarters."""

import numpy as np

from datafarm.task.verdict import Verdict

CORNERS = ("near_left", "near_right", "far_left", "far_right")


def _corner(trace, name):
    """(T, 3) world positions of a towel corner."""
    return np.stack([trace.fixture("towel", f"{name}_{axis}") for axis in "xyz"], axis=1)


def judge(trace, params):
    corners = {name: _corner(trace, name) for name in CORNERS}
    window = trace.last(params["settle_seconds"])
    # Fold 1: each far corner lay on its near corner at some time (both at once).
    far_to_near = np.maximum(np.linalg.norm(corners["far_left"] - corners["near_left"], axis=1),
                             np.linalg.norm(corners["far_right"] - corners["near_right"], axis=1))
    first_fold_done = far_to_near < params["first_fold_tolerance"]
    first_fold_at = int(np.argmax(first_fold_done)) if first_fold_done.any() else len(trace)
    # Fold 2: at the end, all four corners in one pile (the largest pairwise distance).
    stacked = np.stack([corners[name] for name in CORNERS], axis=1)  # (T, 4, 3)
    spread = np.linalg.norm(stacked[:, :, None, :] - stacked[:, None, :, :], axis=3).max(axis=(1, 2))
    # Released: no TCP near any corner at the end.
    tcp_to_corner = np.linalg.norm(trace.tcp[:, :, None, :] - stacked[:, None, :, :], axis=3).min(axis=(1, 2))
    # At rest: the corners and the centre hardly move over the final window (contacts between the
    # stacked tiles keep a few mm/s of solver jitter, so speeds alone would not settle).
    centre = np.stack([trace.fixture("towel", f"center_{axis}") for axis in "xyz"], axis=1)
    tracked = np.concatenate([stacked, centre[:, None, :]], axis=1)[window]
    drift = np.linalg.norm(tracked - tracked[0], axis=2).max()
    checks = {
        "flat_at_start": bool(trace.fixture("towel", "height_span")[0] < params["flat_tolerance"]
                              and spread[0] > 4 * params["second_fold_tolerance"]),
        "first_fold": bool(first_fold_done.any()),
        "folded_in_quarters": bool(np.all(spread[window] < params["second_fold_tolerance"])),
        "second_fold_after_first": bool(first_fold_at < window.start),
        "at_rest": bool(drift < params["rest_drift"]),
        "released": bool(np.all(tcp_to_corner[window] > params["release_distance"])),
    }
    values = {"first_fold_gap_m": float(far_to_near.min()), "end_spread_m": float(spread[window].max()),
              "start_height_span_m": float(trace.fixture("towel", "height_span")[0]),
              "end_drift_m": float(drift), "end_tcp_to_corner_m": float(tcp_to_corner[window].min())}
    return Verdict.from_checks(checks, values)
