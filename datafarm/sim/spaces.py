"""Named action and state spaces of the dual-arm rig: 6 joints + gripper per arm, left first."""

from __future__ import annotations

import numpy as np

SIDES = ("left", "right")
JOINTS_PER_ARM = 6
ARM_DOF = JOINTS_PER_ARM + 1  # plus the gripper opening (m)


def arm_axis_names(side: str) -> list[str]:
    return [f"{side}_joint_{i}" for i in range(1, JOINTS_PER_ARM + 1)] + [f"{side}_gripper"]


AXIS_NAMES: tuple[str, ...] = tuple(name for side in SIDES for name in arm_axis_names(side))
DOF = len(AXIS_NAMES)


def arm_slice(side: str) -> slice:
    """Where one arm's 7 values sit in a 14-vector."""
    if side not in SIDES:
        raise KeyError(f"unknown arm {side!r}; the rig has {list(SIDES)}")
    start = SIDES.index(side) * ARM_DOF
    return slice(start, start + ARM_DOF)


def as_action(values) -> np.ndarray:
    """Validate a 14-vector of joint targets (rad) and gripper openings (m)."""
    action = np.asarray(values, dtype=np.float64)
    if action.shape != (DOF,):
        raise ValueError(f"an action has {DOF} values {list(AXIS_NAMES)}, got shape {action.shape}")
    if not np.all(np.isfinite(action)):
        bad = [AXIS_NAMES[i] for i in np.flatnonzero(~np.isfinite(action))]
        raise ValueError(f"action has non-finite values at {bad}")
    return action
