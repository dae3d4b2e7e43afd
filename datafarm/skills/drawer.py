"""Drawer skills, written on the `Skills` API: push a drawer cabinet's drawer shut with a closed gripper.

The gripper stands upright in front of the drawer front with its fingers opening along the front (so
the fingers' 2 cm edge meets it), low enough that the fingers cover the upper part of the front and
high enough that the gripper body passes over its top edge, beside the handle.
"""

from __future__ import annotations

import numpy as np

from datafarm.skills.errors import Unreachable
from datafarm.skills.library import Skills, pose, top_down

FINGER_HALF_DEPTH = 0.01  # m: a closed finger's half extent across the opening direction
PUSH_TILTS = (0.0, 0.15, 0.3, 0.5)  # rad: leaning outwards puts the fingertips forward, the body back


def _push_rotations(skills: Skills, side: str, across: np.ndarray, point) -> list[np.ndarray]:
    """Upright TCP rotations with the fingers opening along `across`, then leaning outwards a little."""
    yaw = float(np.arctan2(across[1], across[0]))
    lean = skills.outward_yaw(side, point)
    return [top_down(y, tilt, lean) for tilt in PUSH_TILTS for y in (yaw, yaw + np.pi)]


def push_drawer_closed(skills: Skills, side: str, cabinet, lateral: float = 0.06, standoff: float = 0.03,
                       overshoot: float = 0.004, below_top: float = 0.015, back_off: float = 0.05,
                       speed: float = 0.6) -> None:
    """Push `cabinet`'s drawer shut with `side`'s closed gripper, then back off and lift.

    `lateral`: how far from the front's centre (towards the arm) to push, clear of the handle.
    `overshoot`: how far past the shut position the fingers aim, so the drawer reaches its stop.
    `below_top`: TCP height under the front's top edge (the fingers reach 2 cm past the TCP).
    """
    pull = cabinet.pull_direction()
    across = np.cross([0.0, 0.0, 1.0], pull)
    front = cabinet.front_center()
    base = np.asarray(skills.rig.config.arms[side].xyz)
    towards_arm = 1.0 if np.dot(base[:2] - front[:2], across[:2]) > 0 else -1.0
    contact = front + towards_arm * lateral * across
    contact[2] = cabinet.front_top() - below_top
    start = contact + pull * (FINGER_HALF_DEPTH + standoff)
    end = contact - pull * (cabinet.opening() - FINGER_HALF_DEPTH + overshoot)
    above = start + [0.0, 0.0, 0.04]

    candidates = [pose(above, r) for r in _push_rotations(skills, side, across, start)]
    for candidate in candidates:  # the first orientation reachable over the whole stroke
        try:
            skills.solve(side, [candidate])
            skills.solve(side, [pose(start, candidate[:3, :3])])
            skills.solve(side, [pose(end, candidate[:3, :3])])
            break
        except Unreachable:
            continue
    else:
        raise Unreachable(f"push_drawer_closed: {side} arm cannot push the front at {np.round(start, 3).tolist()}")
    rotation = candidate[:3, :3]
    skills.move_to(side, candidate, gripper=0.0)
    skills.move_linear(side, pose(start, rotation), speed=0.6)
    skills.move_linear(side, pose(end, rotation), speed=speed)
    # Back off along the pull direction (clear of the front), then up.
    retreat = end + pull * back_off
    skills.move_linear(side, pose(retreat, rotation), speed=0.6)
    skills.move_linear(side, skills.tilted(side, pose(retreat + [0.0, 0.0, 0.08], rotation)), speed=0.6)
