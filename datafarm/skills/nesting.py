"""Nesting by rim pinches: each vessel (a cup, a bowl) into the one before it, as nest_cups and stack_bowls do.

The vessels are wider than the gripper's stroke, so each is picked by a pinch on its rim: the gripper
points down, the fingers open radially across the wall and close on it. Each arm picks the vessel on
its side (both at once), carries it over the receiving vessel, lowers it in as far as the outer
finger allows and lets go; the vessel drops to the receiver's bottom. The numbers are the task's
params (see datafarm/library/nest_cups/params.yaml); below, "cup" stands for any such vessel.
"""

import logging
from typing import NamedTuple

import numpy as np

from datafarm.skills.errors import GraspFailed, GraspSlipped, Unreachable
from datafarm.skills.library import pose, top_down

log = logging.getLogger(__name__)


class Pinch(NamedTuple):
    """TCP poses of one rim pinch, all with the same orientation."""

    above: np.ndarray  # start of the straight descent onto the rim
    grasp: np.ndarray  # fingers straddling the wall
    lifted: np.ndarray  # straight above the grasp
    carry: np.ndarray  # the cup over the receiver's axis, its bottom `carry_clearance` above the rim


def nest(env, skills, vessels: list[str], params: dict) -> None:
    """Put each later vessel of `vessels` (outermost first) into the one before it."""
    steps = list(zip(vessels, vessels[1:]))  # (receiver, held): e.g. medium into big, then small into medium
    # The arm on each held cup's side of the table; the receivers stand mid-table in both arms' reach.
    sides = ["left" if env.object(held).pose()[0, 3] < 0 else "right" for _, held in steps]
    if len(set(sides)) < len(sides):
        raise Unreachable(f"one arm per held vessel is needed, they are on the {sides} sides")

    # Pick and lift: both arms at once, each pinching its cup's rim.
    carry = _pick_both(env, skills, {side: held for side, (_, held) in zip(sides, steps)}, vessels[0], params)

    # Nest one after the other. Each arm, once it let go, backs away while the next arm carries in.
    _move_straight(skills, sides[0], carry[sides[0]], params["carry_speed"])
    for index, ((receiver, held), side) in enumerate(zip(steps, sides)):
        # Centre the held cup over the receiver, then lower it in as far as the outer finger allows,
        # shifted towards the pinch by part of the wall clearance. Let go, a rim-pinched cup swings
        # its bottom towards the pinch; against the receiver's wall it slides down upright instead.
        rim = _rim_centre(env.object(receiver))
        _bring_bottom_to(env, skills, side, held, rim + [0.0, 0.0, params["carry_clearance"]], params)
        release = _release_point(env, skills, side, held, receiver, vessels, params)
        _bring_bottom_to(env, skills, side, held, release, params)
        skills.release(side, opening=params["release_opening"])
        if index + 1 < len(steps):
            following = sides[index + 1]
            skills.move_linear_both({side: skills.tilted(side, _parked(skills, side, params), tilts=(0.0, 0.3)),
                                     following: carry[following]}, speed=params["carry_speed"])
    skills.wait(0.3)  # the last cup drops in and settles
    skills.home(sides)


def _pick_both(env, skills, held_by, destination, params) -> dict:
    """Both arms pinch their cup's rim and lift it at once; an arm that missed or lost its cup (a
    knock) tries again on its own. Every held cup ends up where the outermost cup (`destination`)
    stands, so each pinch is chosen to be reachable there too. Returns each arm's carry pose."""
    plans = {side: _choose_pinch(skills, side, env.object(held), env.object(destination), params)
             for side, held in held_by.items()}
    skills.move_both({side: [plan.above] for side, plan in plans.items()},
                     grippers={side: params["pinch_opening"] for side in plans})
    skills.move_linear_both({side: plan.grasp for side, plan in plans.items()}, speed=0.5)
    _close(skills, {side: params["squeeze"] for side in plans})
    _lift(skills, {side: plan.lifted for side, plan in plans.items()}, params)
    for side, held in held_by.items():
        for attempt in range(params["grasp_attempts"]):
            if _holding(env, skills, side, held, params):
                break
            env.note("regrasp", side=side, object=held, attempt=attempt + 1)
            if skills.touching(side, held):  # held askew (knocked): stand it back on the table first
                _set_down(env, skills, side, held)
            skills.release(side)
            skills.wait(0.3)
            plans[side] = _choose_pinch(skills, side, env.object(held), env.object(destination), params)
            skills.move_to(side, [plans[side].above], gripper=params["pinch_opening"])
            skills.move_linear(side, plans[side].grasp, speed=0.5)
            _close(skills, {side: params["squeeze"]})
            _lift(skills, {side: plans[side].lifted}, params)
        if not _holding(env, skills, side, held, params):
            raise GraspFailed(f"{held}: not picked in {params['grasp_attempts'] + 1} attempts")
        skills.held[side] = held
    return {side: plan.carry for side, plan in plans.items()}


def _lift(skills, lifts, params) -> None:
    """Straight up to each arm's lifted pose, keeping the gripper's orientation: the pinched cup
    turns with the gripper, so an unchanged orientation keeps it upright."""
    try:
        skills.move_linear_both(lifts, speed=params["carry_speed"])
    except Unreachable:  # a straight line leaves one arm's reach: each arm on its own
        for side, target in lifts.items():
            _move_straight(skills, side, target, params["carry_speed"])


def _holding(env, skills, side, held, params) -> bool:
    """The fingers touch the cup, it rose with them (its bottom within 1 cm of where the pinch puts
    it) and it hangs upright (a knock can turn it in the fingers)."""
    cup = env.object(held)
    expected_bottom = skills.tcp(side)[2, 3] - cup.height + params["pinch_depth"]
    upright = cup.pose()[2, 2] > np.cos(np.deg2rad(params["max_carry_tilt_deg"]))
    return skills.touching(side, held) and cup.pose()[2, 3] > expected_bottom - 0.01 and upright


def _set_down(env, skills, side, held) -> None:
    """Lower the held cup until its lowest point is just above the table."""
    cup = env.object(held)
    frame = cup.pose()
    lowest = frame[2, 3] - cup.spec.geometry.radius * np.sqrt(max(0.0, 1 - frame[2, 2] ** 2))
    target = skills.tcp(side)
    target[2, 3] -= lowest - skills.rig.config.table.height - 0.005
    _move_straight(skills, side, target, speed=0.4)


def _close(skills, openings) -> None:
    """Close the named grippers together, the arms holding still."""
    skills.move_both({side: [skills.tcp(side)] for side in openings}, grippers=openings, min_duration=0.6)
    skills.wait(0.1)


def _parked(skills, side, params) -> np.ndarray:
    """Out of the way of the other arm: back towards this arm's own side of the table, higher."""
    target = skills.tcp(side)
    base = np.asarray(skills.rig.config.arms[side].xyz)
    target[0, 3] += params["park_shift"] * np.sign(base[0])
    target[2, 3] += params["park_rise"]
    return target


def _rim_centre(cup) -> np.ndarray:
    """World centre of a cup's rim (on its axis, so a tilted receiver is handled too)."""
    return (cup.pose() @ [0.0, 0.0, cup.height, 1.0])[:3]


def _release_point(env, skills, side, held, receiver, vessels, params) -> np.ndarray:
    """Where the held cup's bottom centre goes before letting go: below the receiving rim as far as
    keeps the outer fingertip `finger_margin` above every rim around (nested outer cups included),
    and off the receiver's axis towards the pinch by `lean_fraction` of the wall clearance."""
    cup, target = env.object(held), env.object(receiver)
    rim = _rim_centre(target)
    tcp = skills.tcp(side)
    fingertip_below_rim = params["pinch_depth"] + params["finger_length"] * -tcp[2, 2]
    obstacles = [_rim_centre(env.object(name))[2] for name in vessels if name != held
                 and np.hypot(*(env.object(name).pose()[:2, 3] - rim[:2])) < params["neighbour_radius"]]
    bottom_z = max(max(obstacles) + params["finger_margin"] + fingertip_below_rim - cup.height,
                   rim[2] - params["max_release_depth"])
    towards_pinch = tcp[:2, 3] - cup.pose()[:2, 3]
    towards_pinch /= np.linalg.norm(towards_pinch)
    geometry, inner = cup.spec.geometry, target.spec.geometry
    clearance = inner.radius - inner.wall - geometry.radius
    xy = rim[:2] + params["lean_fraction"] * clearance * towards_pinch
    return np.array([xy[0], xy[1], bottom_z])


def _move_straight(skills, side, target, speed=1.0) -> None:
    try:
        skills.move_linear(side, target, speed=speed)
    except Unreachable:  # no straight path: a joint-space move to the same pose
        skills.move_to(side, [target])


def _pinch_plans(skills, side, cup, receiver, params):
    """(grasp, carry) TCP pose pairs with one orientation: the grasp pinches the held cup's wall at
    the centre of a stave (flat on the finger pads), fingers opening radially; the carry pose holds
    the cup upright over the receiver's axis, its bottom `carry_clearance` above the rim.

    The pinch points lie across the arm's reach, so the gripper leans outwards (as the PiPER's
    wrist needs high above the table) by turning about its opening axis: the pads stay parallel
    to the wall and the cup stays upright.
    """
    geometry = cup.spec.geometry
    frame = cup.pose()
    cup_yaw = np.arctan2(frame[1, 0], frame[0, 0])
    staves = cup_yaw + 2 * np.pi * np.arange(geometry.staves) / geometry.staves
    mid_wall = geometry.radius - geometry.wall / 2
    rim = _rim_centre(receiver)
    outward = skills.outward_yaw(side, rim)
    for sign in (1, -1):
        wanted = outward + sign * np.pi / 2
        angle = staves[np.argmin(np.abs(np.angle(np.exp(1j * (staves - wanted)))))]
        lean = angle - sign * np.pi / 2
        radial = mid_wall * np.array([np.cos(angle), np.sin(angle), 0.0])
        grasp_point = frame[:3, 3] + radial + [0.0, 0.0, cup.height - params["pinch_depth"]]
        carry_point = rim + radial + [0.0, 0.0, params["carry_clearance"] + cup.height - params["pinch_depth"]]
        for tilt in params["pinch_tilts"]:
            for yaw in (angle, angle + np.pi):
                rotation = top_down(yaw, tilt, lean)
                yield pose(grasp_point, rotation), pose(carry_point, rotation)


def _choose_pinch(skills, side, cup, receiver, params) -> Pinch:
    """The first rim pinch (see `_pinch_plans`) whose poses the arm reaches. `lifted` is at
    carrying height if the arm reaches that high above the grasp (near its base it may not), else
    lower: the carry move then rises on its way."""
    for grasp, carry in _pinch_plans(skills, side, cup, receiver, params):
        above = grasp.copy()
        above[:3, 3] -= grasp[:3, 2] * params["approach"]
        try:
            for target in (grasp, carry, above):
                skills.solve(side, [target])
        except Unreachable:
            continue
        for drop in params["lift_drops"]:
            lifted = grasp.copy()
            lifted[2, 3] = carry[2, 3] - drop
            try:
                skills.solve(side, [lifted])
            except Unreachable:
                continue
            return Pinch(above, grasp, lifted, carry)
    raise Unreachable(f"{side} arm: no rim pinch of {cup.name} is reachable")


def _bring_bottom_to(env, skills, side, name, goal, params) -> None:
    """Move the held cup's bottom centre to `goal` (world xyz). The first move keeps the grip's
    offset; small straight corrections then remove what the cup's sway left."""
    cup = env.object(name)
    for step in range(params["align_steps"] + 1):
        error = goal - cup.pose()[:3, 3]
        if step and np.hypot(error[0], error[1]) < params["align_tolerance"] and abs(error[2]) < 0.003:
            break
        target = skills.tcp(side)
        target[:3, 3] += error
        try:
            skills.move_linear(side, target, speed=0.6 if step == 0 else 0.3)
        except Unreachable:  # no straight path: a joint-space move, which keeps the orientation
            skills.move_to(side, [target])
        skills.wait(0.15)  # let the held cup stop swinging before measuring again
    if not skills.touching(side, name):
        raise GraspSlipped(f"{name} left the {side} gripper on its way to the receiving cup")
    log.debug("%s bottom %.1f mm from its goal", name, 1000 * np.linalg.norm(goal - cup.pose()[:3, 3]))
