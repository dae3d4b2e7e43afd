"""Expert for screw_in_basket: the arm on the screw's side picks it up by the shaft, carries it over
the basket, lowers it in lying along one of the basket's axes and lets go.

The pick is pick_screw's (datafarm.skills.small_parts): the screw is thin (6 mm) and lies on the
table, so the grasp height is set from the fingers' lowest corner.
"""

import numpy as np

from datafarm.skills import GraspSlipped, Unreachable, pose
from datafarm.skills.small_parts import balance_point, pick_lying

def solve(env, skills, params):
    # Pick: grasp the shaft at its balance point and lift it clear of the basket's rim.
    side = pick_lying(env, skills, "screw", params)
    # Carry: the screw over the basket's centre, lying along one of its axes, above the rim.
    lower = carry_over_basket(env, skills, side, params)
    # Place: straight down into the basket, the screw just above the floor, then let go and back off.
    skills.move_linear(side, lower, speed=0.4)
    skills.set_gripper(side, params["release_opening"], duration=0.4)
    skills.held[side] = None
    skills.wait(0.2)
    up = skills.tcp(side)
    up[2, 3] += params["hover"] + params["rim_height"]
    skills.move_linear(side, skills.tilted(side, up), speed=0.6)
    skills.home([side])


def drop_point(basket) -> np.ndarray:
    """World xy where the screw's balance point goes down: the basket's centre."""
    return basket.pose()[:2, 3]


def screw_goals(basket, height: float, params):
    """Screw poses (world 4x4) with the balance point over the drop point at `height` above the
    basket's bottom, the shaft along either basket axis (either way round), tipped by the carry
    pitches."""
    frame = basket.pose()
    for pitch in params["carry_pitches"]:
        for yaw in np.arange(4) * np.pi / 2:
            goal = np.eye(4)
            goal[:3, :3] = frame[:3, :3] @ _rz(yaw) @ _ry(pitch)
            goal[:3, 3] = [*drop_point(basket), (frame @ [0.0, 0.0, height, 1.0])[2]]
            yield goal


def carry_over_basket(env, skills, side, params) -> np.ndarray:
    """Move the held screw over the basket's centre, its lowest point `hover` above the rim, and
    correct what the grip's sway left. Returns the TCP pose that lowers it into the basket."""
    screw, basket = env.object("screw"), env.object("basket")
    # The grip: where the screw's balance point (as a frame with the screw's axes) is in the TCP frame.
    grip = np.linalg.inv(skills.tcp(side)) @ balance_frame(screw)
    above_rim = params["rim_height"] + params["hover"] + params["screw_axis_height"]
    inside = params["floor"] + params["release_height"] + params["screw_axis_height"]
    for goal in screw_goals(basket, above_rim, params):
        hover = downward_roll(goal, grip) @ np.linalg.inv(grip)
        lower = hover.copy()
        lower[2, 3] -= above_rim - inside
        try:
            skills.solve(side, [lower])
            skills.move_to(side, [hover])
            break
        except Unreachable:
            continue
    else:
        raise Unreachable(f"{side} arm: the basket's centre is out of reach with the screw")
    # Corrections: small straight moves until the balance point is over the drop point.
    target_xy = drop_point(basket)
    for _ in range(params["align_steps"]):
        skills.wait(0.15)  # let the screw stop swinging before measuring
        error = target_xy - balance_point(screw)[:2]
        if np.hypot(*error) < params["align_tolerance"]:
            break
        corrected = skills.tcp(side)
        corrected[:2, 3] += error
        skills.move_linear(side, corrected, speed=0.3)
        lower[:2, 3] += error
    if not skills.touching(side, "screw"):
        raise GraspSlipped(f"the screw left the {side} gripper on its way to the basket")
    return lower


def downward_roll(goal: np.ndarray, grip: np.ndarray) -> np.ndarray:
    """`goal` turned about the screw's own axis (a round shaft: any roll lies the same) so that the
    TCP holding it with `grip` points as straight down as it can (a screw that rolled before it was
    grasped holds its frame upside down)."""
    rolls = np.linspace(0.0, 2 * np.pi, 36, endpoint=False)
    turned = [goal @ _rx(roll) for roll in rolls]
    return min(turned, key=lambda candidate: (candidate @ np.linalg.inv(grip))[2, 2])


def balance_frame(obj) -> np.ndarray:
    """The object's frame moved to its centre of mass."""
    frame = obj.pose()
    frame[:3, 3] = balance_point(obj)
    return frame


def _rx(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1.0, 0.0, 0.0, 0.0], [0.0, c, -s, 0.0], [0.0, s, c, 0.0], [0.0, 0.0, 0.0, 1.0]])


def _rz(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _ry(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
