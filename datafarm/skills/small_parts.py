"""Pinching small parts that lie on the table (a screw, a nut): grasps set from the fingers' lowest corner.

A thin part (a 6 mm shaft, a 1.4 cm nut) lies lower than the fingertips can reach with the TCP at its
middle, so the grasp height is set from the fingers' lowest corner, just above the table, not from the
part's height. The numbers are the task's params (see datafarm/library/pick_screw/params.yaml).
"""

from __future__ import annotations

import numpy as np

from datafarm.skills.errors import GraspFailed, GraspSlipped, Unreachable
from datafarm.skills.library import pose, top_down

FINGER_TIP = 0.021  # m: fingertips beyond the TCP along the gripper axis (configs/robot/piper.yaml)
FINGER_HALF_WIDTH = 0.01  # m: half the pad's width across the opening direction
FINGER_THICKNESS = 0.012  # m: each pad's thickness along the opening direction


def pick_lying(env, skills, name: str, params: dict) -> str:
    """Pinch the lying, shaft-like object `name` across its axis at its balance point and lift it by
    `params["lift_height"]`, retrying up to `params["grasp_attempts"]` times; returns the arm's side."""
    table = skills.rig.config.table.height
    for attempt in range(params["grasp_attempts"]):
        # Look: it may have rolled since the last try. The arm on the object's side of the table,
        # else the other (mid-table, near the bases, a lean along the shaft may suit only one);
        # a slanted pinch (leaning outwards) only where neither reaches one along the shaft.
        centre = balance_point(env.object(name))
        nearer = "left" if centre[0] < 0 else "right"
        arms = (nearer, "right" if nearer == "left" else "left")
        for along_shaft, side in [(True, arm) for arm in arms] + [(False, arm) for arm in arms]:
            plans = plan_pinch(env, skills, side, name, table, params, along_shaft)
            if plans:
                break
        else:
            raise Unreachable(f"no arm reaches a grasp of the {name} at {np.round(centre, 3).tolist()}")
        try:
            pinch(env, skills, side, name, plans, params)
            # Lift straight up; high above the table the wrist needs the gripper leaning outwards.
            skills.lift(side, params["lift_height"])
            if not skills.touching(side, name):
                raise GraspSlipped(f"the {name} left the fingers while lifting")
            return side
        except (GraspFailed, GraspSlipped) as error:
            env.note("regrasp", attempt=attempt + 1, error=str(error))
            skills.release(side, opening=params["grasp_opening"])
            skills.home([side])  # clear of the object, so the next look and plan start afresh
    raise GraspFailed(f"{name} not picked in {params['grasp_attempts']} attempts")


def balance_point(obj) -> np.ndarray:
    """World position of the object's centre of mass (on the shaft's axis, nearer the head)."""
    local = obj.body.cmass_local_pose.p
    return (obj.pose() @ [*local, 1.0])[:3]


def lowest_finger_offset(rotation: np.ndarray, width: float) -> float:
    """How far below the TCP the fingers' lowest corner is, for a TCP rotation and finger gap."""
    corners = np.array([[x, y, FINGER_TIP] for x in (-FINGER_HALF_WIDTH, FINGER_HALF_WIDTH)
                        for y in (-width / 2 - FINGER_THICKNESS, width / 2 + FINGER_THICKNESS)])
    return float(-(corners @ rotation.T)[:, 2].min())


def plan_pinch(env, skills, side, name, table, params, along_shaft: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """(grasp, above) TCP poses of the reachable pinches across the lying object's axis at its
    balance point, fingertips just above the table; empty if the arm reaches none.

    Where the arm needs the gripper to lean, it leans `along_shaft` (turning about the opening
    axis: the pads stay vertical and squeeze the shaft at its sides, not at a slant that may wedge
    a fingertip under it), else outwards. The TCP sits on the approach line through the balance point."""
    obj = env.object(name)
    point = balance_point(obj)
    axis_yaw = np.arctan2(obj.pose()[1, 0], obj.pose()[0, 0])
    across = axis_yaw + np.pi / 2  # opening direction: perpendicular to the shaft
    outward = skills.outward_yaw(side, point)
    lean = outward
    if along_shaft:
        lean = axis_yaw if np.cos(axis_yaw - outward) > 0 else axis_yaw + np.pi
    for tilt in params["tilts"]:
        plans = low_grasps(skills, side, point, [top_down(yaw, tilt, lean) for yaw in (across, across + np.pi)],
                           table, params)
        if plans:
            return plans
    return []


def low_grasps(skills, side, point, rotations, table, params) -> list[tuple[np.ndarray, np.ndarray]]:
    """(grasp, above) TCP poses, one per reachable rotation, with `point` on the approach axis and the
    fingertips `params["fingertip_clearance"]` above the table at the fingers' widest."""
    plans = []
    for rotation in rotations:
        # The widest the fingers get while closing is the opening: keep those corners off the table.
        tcp_z = table + params["fingertip_clearance"] + lowest_finger_offset(rotation, params["grasp_opening"])
        depth = (tcp_z - point[2]) / -rotation[2, 2]  # `point` this far along the approach axis
        grasp = pose(point - rotation[:, 2] * depth, rotation)
        above = grasp.copy()
        above[:3, 3] -= rotation[:, 2] * params["approach"]
        try:
            skills.solve(side, [grasp])
            skills.solve(side, [above])
        except Unreachable:
            continue
        plans.append((grasp, above))
    return plans


def pinch(env, skills, side, name, plans, params, min_width: float = 0.0) -> None:
    """Open above the part, descend straight, close on it; GraspFailed if the fingers miss it or close
    narrower than `min_width` (a finger in a nut's hole, say)."""
    skills.move_to(side, [plan[1] for plan in plans], gripper=params["grasp_opening"])
    # The grasp below the approach pose the joint-space move chose (of the two finger orders).
    grasp = min(plans, key=lambda plan: np.linalg.norm(plan[1][:3, :3] - skills.tcp(side)[:3, :3]))[0]
    skills.move_linear(side, grasp, speed=0.5)
    skills.set_gripper(side, 0.0, duration=0.6)
    skills.wait(0.1)
    if not skills.touching(side, name):
        raise GraspFailed(f"the {side} fingers closed beside the {name}")
    if skills.gripper_opening(side) < min_width:
        raise GraspFailed(f"the {side} fingers closed to {skills.gripper_opening(side):.3f} m on the {name}, "
                          f"narrower than {min_width:.3f} m")
    skills.held[side] = name
