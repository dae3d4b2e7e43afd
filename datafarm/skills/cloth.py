"""Cloth skills: pinch a towel's corner tab from above, and turn pinched corners over in a fold.

Functions take the `Skills` object (its motions, IK and environment) so they compose with the rest of
the skill library; they use its planning helpers (`_run`, `_joint_plan`, `_commanded_tcp`). Grasps are
physical: the fingers squeeze the tab and friction holds it.
"""

from __future__ import annotations

import numpy as np

from datafarm.sim.ik import IKError
from datafarm.skills.errors import GraspFailed, Unreachable
from datafarm.skills.library import (CLOSED_EMPTY, LINEAR_SPEED, TILTS, Skills, _interpolate_rotation, pose,
                                      top_down)

# Finger pad box around the TCP (configs/robot/piper.yaml, link7/link8): the tips reach this far past
# the TCP along the approach axis, the pads are this wide, and each pad is this thick.
_TIP_REACH = 0.021
_PAD_HALF_WIDTH = 0.01
_PAD_THICKNESS = 0.012
# A pinch is only taken if the same gripper rotation also reaches this far above it (m), since the
# corner is carried up over in a fold with the rotation it was pinched with.
_CARRY_HEADROOM = 0.12


def finger_drop(rotation: np.ndarray, opening: float) -> float:
    """How far below the TCP the lowest point of the finger pads lies, for this TCP rotation."""
    lowest = 0.0
    for along in (-1.0, 1.0):
        for across in (opening / 2, opening / 2 + _PAD_THICKNESS):
            for side in (-1.0, 1.0):
                corner = rotation @ [side * _PAD_HALF_WIDTH, along * across, _TIP_REACH]
                lowest = min(lowest, corner[2])
    return -lowest


def pinch_candidates(skills: Skills, side: str, point, yaw: float, floor: float, opening: float,
                     clearance: float) -> list[np.ndarray]:
    """Top-down pinches at `point` (both finger orders, upright first, then leaning outwards), each
    lowered as far as the fingertips allow without coming closer than `clearance` to `floor`."""
    point = np.asarray(point, dtype=float)
    lean = skills.outward_yaw(side, point)
    out = []
    for tilt in TILTS:
        for y in (yaw, yaw + np.pi):
            rotation = top_down(y, tilt, lean)
            z = max(point[2], floor + clearance + finger_drop(rotation, opening))
            out.append(pose([point[0], point[1], z], rotation))
    return out


def pinch_both(skills: Skills, points: dict[str, object], yaw: dict[str, float], touch: dict[str, set[str]],
               floor: float, opening: float = 0.035, clearance: float = 0.003, approach: float = 0.06,
               park: dict[str, object] | None = None) -> None:
    """Pinch a point per arm at once (e.g. two corner tabs): hover above, descend, squeeze.

    `touch[side]` names the entities the fingers must touch; raises GraspFailed when a gripper closes on
    nothing, Unreachable when no pinch of a point is reachable. `park` moves other arms to the given
    poses while the pinching arms go to their hover poses.
    """
    above, down = {}, {}
    for side, point in points.items():
        choice = _reachable_pinch(skills, side, pinch_candidates(skills, side, point, yaw[side], floor, opening,
                                                                 clearance), approach)
        if choice is None:
            raise Unreachable(f"{side} arm: no pinch at {np.round(point, 3).tolist()} is reachable")
        above[side], down[side] = choice
    skills.move_both({**(park or {}), **above}, {side: opening for side in points})
    skills.move_linear_both(down, speed=0.5)
    _squeeze(skills, list(points))
    skills.wait(0.15)
    for side in points:
        touched = any(skills.env.contacts_between(skills.finger_names(side), {name}) > 0 for name in touch[side])
        if skills.gripper_opening(side) < CLOSED_EMPTY or not touched:
            skills.env.note("pinch_failed", side=side, opening=skills.gripper_opening(side))
            raise GraspFailed(f"pinch: the {side} gripper closed on nothing at {np.round(points[side], 3).tolist()}")
        skills.held[side] = "towel"


def _reachable_pinch(skills: Skills, side: str, candidates: list[np.ndarray], approach: float):
    """(hover, pinch) for the least-leaning candidate reachable from hover to carry height; of its two
    finger orders, the one that leaves the wrist (joint 6) most room to turn while the corner is carried."""
    for pair in zip(candidates[0::2], candidates[1::2]):
        options = []
        for candidate in pair:
            hover = candidate.copy()
            hover[:3, 3] -= candidate[:3, 2] * approach
            raised = candidate.copy()
            raised[2, 3] += _CARRY_HEADROOM
            try:
                q = skills.solve(side, [candidate])
                skills.solve(side, [hover])
                skills.solve(side, [raised])  # the corner must be liftable without turning the wrist
            except Unreachable:
                continue
            options.append((abs(q[5]), hover, candidate))
        if options:
            _, hover, candidate = min(options, key=lambda option: option[0])
            return hover, candidate
    return None


def _squeeze(skills: Skills, sides: list[str], duration: float = 0.6) -> None:
    goals = {}
    for side in sides:
        goal = skills.env.arm_command(side).copy()
        goal[6] = 0.0
        goals[side] = skills._joint_plan(side, goal, duration / max(skills.speed, 1e-3))
    skills._run(goals)


def fold_arc(start, target, height: float, points: int = 12) -> np.ndarray:
    """(points, 3) positions along a half-ellipse from `start` over to `target`: the path of a cloth
    edge turned over about the line halfway between them, rising `height` at the top."""
    start, target = np.asarray(start, dtype=float), np.asarray(target, dtype=float)
    angles = np.linspace(0.0, np.pi, points + 1)[1:]
    path = start + np.outer((1 - np.cos(angles)) / 2, target - start)
    path[:, 2] += height * np.sin(angles)
    return path


def follow_paths(skills: Skills, paths: dict[str, np.ndarray], speed: float = 0.5) -> None:
    """Move each arm's TCP through its positions (arriving together), keeping its current rotation,
    or leaning it outwards (`tilted`) along the way where that rotation cannot reach; the whole path is
    one smooth motion (quintic in arc length), not a stop at every point."""
    plans = {}
    duration = 0.0
    for side, path in paths.items():
        start = skills._commanded_tcp(side)
        polyline = np.vstack([start[:3, 3], path])
        length = float(np.linalg.norm(np.diff(polyline, axis=0), axis=1).sum())
        duration = max(duration, 15 / 8 * length / (LINEAR_SPEED * speed * skills.speed), 0.3)
    steps = max(2, int(np.ceil(duration / skills.rig.control_dt)))
    t = np.arange(1, steps + 1) / steps
    fractions = 10 * t**3 - 15 * t**4 + 6 * t**5
    for side, path in paths.items():
        plans[side] = _path_plan(skills, side, np.vstack([skills._commanded_tcp(side)[:3, 3], path]), fractions)
    skills._run(plans)


def _path_plan(skills: Skills, side: str, polyline: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    start = skills._commanded_tcp(side)
    segment = np.linalg.norm(np.diff(polyline, axis=0), axis=1)
    along = np.concatenate([[0.0], np.cumsum(segment)]) / max(segment.sum(), 1e-9)
    positions = np.stack([np.interp(fractions, along, polyline[:, axis]) for axis in range(3)], axis=1)
    end_pose = pose(polyline[-1], start[:3, :3])
    errors = []
    for goal in [start[:3, :3]] + [c[:3, :3] for c in skills.tilted(side, end_pose, tilts=(0.3, 0.5, 0.8))]:
        seed = skills.env.arm_command(side)[:6]
        plan = []
        try:
            for fraction, position in zip(fractions, positions):
                rotation = _interpolate_rotation(start[:3, :3], goal, fraction)
                seed = skills.ik[side].solve(pose(position, rotation), seed=seed, restarts=0).qpos
                plan.append(seed)
        except IKError as error:
            errors.append(str(error))
            continue
        gripper = np.full((len(plan), 1), skills.env.arm_command(side)[6])
        return np.hstack([np.asarray(plan), gripper])
    raise Unreachable(f"{side} arm: fold path: {errors[0]}")


def carry_fold(skills: Skills, targets, height: float = 0.1, drop: float = 0.004, speed: float = 0.5) -> None:
    """Turn each arm's pinched point over along a half-ellipse (`fold_arc`) and lay it at its target.

    `targets()` returns {side: world TCP position}. The arc ends `height / 4` above the targets as
    read at the start (a lower arc is tried where the high one is out of reach); then the targets are
    read again (the moving cloth may have dragged them) and the
    points come straight down to `drop` above them.
    """
    goals = targets()
    for scale in (1.0, 0.7, 0.5):  # a lower arc where the wrist cannot hold the gripper that high
        paths = {}
        for side, goal in goals.items():
            here = skills._commanded_tcp(side)[:3, 3]
            hover = np.asarray(goal, dtype=float) + [0, 0, height / 4]
            paths[side] = fold_arc(here, hover, height * scale)
        try:
            follow_paths(skills, paths, speed)
            break
        except Unreachable:
            if scale == 0.5:
                raise
    down = {side: [np.asarray(goal, dtype=float) + [0, 0, drop]] for side, goal in targets().items()}
    follow_paths(skills, down, speed)


def let_go(skills: Skills, sides: list[str], opening: float = 0.035, rise: float = 0.08) -> None:
    """Open the pinching grippers together, then lift straight up clear of the cloth."""
    goals = {}
    for side in sides:
        goal = skills.env.arm_command(side).copy()
        goal[6] = opening
        goals[side] = skills._joint_plan(side, goal, 0.4 / max(skills.speed, 1e-3))
    skills._run(goals)
    for side in sides:
        skills.held[side] = None
    up = {}
    for side in sides:
        target = skills._commanded_tcp(side)
        target[2, 3] += rise
        up[side] = [target] + skills.tilted(side, target, tilts=(0.3, 0.5))
    skills.move_linear_both(up, speed=0.6)
