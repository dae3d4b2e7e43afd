"""Expert for fold_towel: fold the towel in half far-to-near with both arms, then in half again
sideways with the arm on the towel's side (left-to-right with the left arm when it lies centred)."""

import numpy as np

from datafarm.skills import GraspFailed
from datafarm.scene.fixtures.towel import tab_direction
from datafarm.skills.cloth import carry_fold, let_go, pinch_both


def _squeeze_yaw(towel, corner) -> float:
    """World yaw the fingers squeeze a corner's tab along: across the way the tab sticks out."""
    frame = towel.frame()
    out = frame[:3, :3] @ tab_direction(corner)
    return float(np.arctan2(out[0], -out[1]))


def _pinch_point(towel, corners, standoff):
    """Between the tabs of `corners` (one tab, or a side-by-side pair), a little outside them so the
    fingers stay clear of the cloth tiles."""
    tabs = np.mean([towel.tab_position(c) for c in corners], axis=0)
    outward = tabs - np.mean([towel.corner_position(c) for c in corners], axis=0)
    outward[2] = 0.0
    return tabs + standoff * outward / np.linalg.norm(outward)


def _pinch(env, skills, towel, grips, params, park=None):
    """Pinch each arm's corner tab, retrying after a miss (the tabs are re-read each time)."""
    table = env.rig.config.table.height
    yaw = {side: _squeeze_yaw(towel, corners[0]) for side, corners in grips.items()}
    for attempt in range(params["pinch_attempts"]):
        points = {side: _pinch_point(towel, corners, params["tab_standoff"]) for side, corners in grips.items()}
        touch = {side: {towel.tab(c).name for c in corners} for side, corners in grips.items()}
        try:
            pinch_both(skills, points, yaw, touch, floor=table, park=park)
            return
        except GraspFailed:
            env.note("re_pinch", attempt=attempt + 1)
            let_go(skills, list(grips))
    raise GraspFailed(f"towel corners not pinched in {params['pinch_attempts']} attempts")


def _onto(skills, towel, moves, layers, params):
    """A function giving the TCP targets that lay each pinched corner (unturned, as its tab is held)
    onto another corner, `layers` cloth layers up, wherever that corner is by then."""
    offsets = {side: skills.tcp(side)[:3, 3] - towel.corner_position(corner) for side, (corner, _) in moves.items()}
    lift = [0, 0, layers * params["layer_thickness"]]
    return lambda: {side: towel.corner_position(onto) + offsets[side] + lift for side, (_, onto) in moves.items()}


def solve(env, skills, params):
    towel = env.fixture("towel")

    # Fold 1: each arm pinches the tab of the far corner on its side ...
    _pinch(env, skills, towel, {"left": ["far_left"], "right": ["far_right"]}, params)
    # ... and both carry the far edge over together, laying each far corner onto its near corner.
    carry_fold(skills, _onto(skills, towel, {"left": ("far_left", "near_left"), "right": ("far_right", "near_right")},
                             layers=2, params=params), height=params["fold_height"], speed=params["carry_speed"])
    let_go(skills, ["left", "right"])

    # Fold 2: the arm on the towel's side of the table (the left one when centred) pinches the near tab
    # on its side (that far corner lies on the near corner, inside the coming fold) and lays its pair
    # onto the other pair, while the other arm waits out of the way at its rest pose: the carry then
    # ends over the table's middle, not out at the far side of the folding arm's reach.
    side = "right" if towel.frame()[0, 3] > 0 else "left"
    other = "left" if side == "right" else "right"
    rest = skills.ik[other].fk(np.array(env.rig.config.rest_qpos))
    _pinch(env, skills, towel, {side: [f"near_{side}"]}, params, park={other: rest})
    carry_fold(skills, _onto(skills, towel, {side: (f"near_{side}", f"near_{other}")}, layers=3, params=params),
               height=params["fold_height"], speed=params["carry_speed"])
    let_go(skills, [side])
    skills.home([side])
