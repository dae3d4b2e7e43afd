"""Expert for nut_on_plate: the arm on the nut's side grips it across two flats, sets it on the
plate's centre and lets go.

The nut is only 1.4 cm thick, so the grasp height is set from the fingers' lowest corner (just
above the table), not from the nut's middle: the pads then cover its whole side.
"""

import numpy as np

from datafarm.skills import GraspFailed, GraspSlipped, Unreachable, pose, top_down
from datafarm.skills.small_parts import low_grasps, pinch

def solve(env, skills, params):
    table = skills.rig.config.table.height
    # Pick: grip two opposite flats and lift the nut clear of the plate.
    side = pick(env, skills, table, params)
    # Place: the nut's bottom onto the plate's centre (skills.place keeps the grip's offset), let go.
    skills.place(side, plate_target(env, params), clearance=params["place_clearance"], release=False)
    skills.set_gripper(side, params["release_opening"], duration=0.4)
    skills.held[side] = None
    up = skills.tcp(side)
    up[2, 3] += params["lift_height"]
    skills.move_linear(side, skills.tilted(side, up), speed=0.6)
    skills.home([side])


def plate_target(env, params) -> np.ndarray:
    """World point the nut's bottom centre goes to: the centre of the plate's top."""
    plate = env.object("plate")
    return (plate.pose() @ [0.0, 0.0, plate.height, 1.0])[:3]


def pick(env, skills, table, params) -> str:
    """Grip and lift the nut with one arm; returns that arm's side."""
    for attempt in range(params["grasp_attempts"]):
        # Look: it may have been knocked since the last try. The arm on the nut's side of the
        # table, else the other.
        nut = env.object("nut")
        nearer = "left" if nut.pose()[0, 3] < 0 else "right"
        for side in (nearer, "right" if nearer == "left" else "left"):
            plans = plan_grip(skills, side, nut, table, params)
            if plans:
                break
        else:
            raise Unreachable(f"no arm reaches a grip of the nut at {np.round(nut.pose()[:3, 3], 3).tolist()}")
        try:
            # A knocked arm can put a finger in the hole: a grip narrower than the flats is a miss.
            pinch(env, skills, side, "nut", plans, params, min_width=params["min_grip_width"])
            gripped_axis = axis_in_grip(skills, side, nut)
            skills.lift(side, params["lift_height"])
            if not skills.touching(side, "nut"):
                raise GraspSlipped("the nut left the fingers while lifting")
            # A knock while gripping can leave it turning in the fingers: it would not lie flat.
            if axis_in_grip(skills, side, nut) @ gripped_axis < np.cos(np.deg2rad(params["max_carry_tilt_deg"])):
                set_down(skills, side, nut, table)
                raise GraspSlipped("the nut hangs askew in the fingers")
            return side
        except (GraspFailed, GraspSlipped) as error:
            env.note("regrasp", attempt=attempt + 1, error=str(error))
            # Unclamp only a little, then back off: a finger in the nut's hole, opened wide, would
            # press on the hole's far side and carry the nut away.
            skills.release(side, opening=skills.gripper_opening(side) + params["unclamp"])
            skills.home([side])  # clear of the nut, so the next look and plan start afresh
    raise GraspFailed(f"nut not picked in {params['grasp_attempts']} attempts")


def axis_in_grip(skills, side, nut) -> np.ndarray:
    """The nut's axis in the TCP's frame (it stays put while the grip holds)."""
    return skills.tcp(side)[:3, :3].T @ nut.pose()[:3, 2]


def set_down(skills, side, nut, table) -> None:
    """Lower the held nut until its lowest point is just above the table."""
    frame = nut.pose()
    lowest = frame[2, 3] - corner_radius(nut) * np.sqrt(max(0.0, 1 - frame[2, 2] ** 2))
    target = skills.tcp(side)
    target[2, 3] -= lowest - table - 0.005
    try:
        skills.move_linear(side, target, speed=0.4)
    except Unreachable:
        skills.move_to(side, [target])


def corner_radius(nut) -> float:
    """The nut's corner radius, from its parts' outline."""
    half = nut.spec.geometry.half_size
    return float(np.hypot(half[0], half[1]))


def plan_grip(skills, side, nut, table, params) -> list[tuple[np.ndarray, np.ndarray]]:
    """(grasp, above) TCP poses of the reachable grips across two flats, least lean first.

    The fingers open along a flat's normal (the nut's yaw plus a multiple of 60 deg). Where the arm
    needs the gripper to lean, it leans about the opening axis, so the pads stay parallel to the
    flats; of the three flat pairs, the one whose lean direction is nearest outwards is used."""
    frame = nut.pose()
    centre = (frame @ [0.0, 0.0, nut.height / 2, 1.0])[:3]
    nut_yaw = np.arctan2(frame[1, 0], frame[0, 0])
    outward = skills.outward_yaw(side, centre)
    openings = nut_yaw + np.arange(3) * np.pi / 3
    # Lean perpendicular to the opening, towards the outward side; best-aligned pair first.
    leans = [opening + np.pi / 2 if np.sin(outward - opening) > 0 else opening - np.pi / 2 for opening in openings]
    order = np.argsort([-np.cos(lean - outward) for lean in leans])
    for tilt in params["tilts"]:
        for index in order:
            rotations = [top_down(yaw, tilt, leans[index]) for yaw in (openings[index], openings[index] + np.pi)]
            plans = low_grasps(skills, side, centre, rotations, table, params)
            if plans:
                return plans
    return []
