"""The skill API an expert is written in. Every motion steps the environment; nothing teleports.

Grasps are physical: the fingers close on the object and friction holds it. A skill that cannot do
its job raises a `SkillError` subclass (`Unreachable`, `GraspFailed`, `GraspSlipped`).

Frames: poses are world 4x4 matrices of the TCP (the point between the finger pads). The TCP's z
axis points out of the gripper, its y axis is the fingers' opening direction.
"""

from __future__ import annotations

import functools

import numpy as np

from datafarm.geometry import rotation_angle
from datafarm.sim.ik import ArmIK, IKError
from datafarm.sim.spaces import SIDES, arm_slice
from datafarm.sim.trajectory import quintic_trajectory
from datafarm.skills.errors import GraspFailed, GraspSlipped, SkillError, Unreachable
from datafarm.task.env import TaskEnv

CLOSED_EMPTY = 0.002  # m: a gripper closed this far holds nothing
LINEAR_SPEED = 0.25  # m/s, peak TCP speed of straight-line moves at speed 1
TILTS = (0.0, 0.3, 0.5, 0.8)  # rad: how far a gripper may lean outwards to reach a pose


def _skill(method):
    """Name the skill in the message of any SkillError raised inside it."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except SkillError as error:
            if not str(error).startswith(method.__name__ + ":"):
                error.args = (f"{method.__name__}: {error}",)
            raise

    return wrapper


def top_down(yaw: float, tilt: float = 0.0, tilt_towards: float = 0.0) -> np.ndarray:
    """TCP rotation pointing down, the fingers opening along world direction `yaw`.

    `tilt` leans the approach axis by that angle (rad) in the horizontal direction `tilt_towards`.
    """
    opening = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    approach = np.array([0.0, 0.0, -1.0])
    if tilt:
        lean = np.array([np.cos(tilt_towards), np.sin(tilt_towards), 0.0])
        approach = np.cos(tilt) * approach + np.sin(tilt) * lean
        opening = opening - opening.dot(approach) * approach
        opening /= np.linalg.norm(opening)
    x_axis = np.cross(opening, approach)
    return np.column_stack([x_axis, opening, approach])


def pose(position, rotation: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = position
    return out


class Skills:
    """Motions for both arms. `speed` scales every motion (execution randomization)."""

    def __init__(self, env: TaskEnv, speed: float = 1.0, joint_speed_fraction: float = 0.5):
        self.env = env
        self.rig = env.rig
        self.speed = speed
        self.ik = {side: ArmIK.for_arm(env.rig, side) for side in SIDES}
        arm = env.rig.arms["left"]
        self.max_velocity = arm.max_velocity * joint_speed_fraction * speed
        self.max_acceleration = 5.0 * joint_speed_fraction * speed
        self.held: dict[str, str | None] = {side: None for side in SIDES}

    # ----- state -------------------------------------------------------------------------------
    def tcp(self, side: str) -> np.ndarray:
        return self.rig.tcp_pose(side)

    def gripper_opening(self, side: str) -> float:
        return float(self.rig.arms[side].qpos()[6])

    def outward_yaw(self, side: str, point) -> float:
        """Horizontal direction from the arm's base out to a point. The PiPER's wrist pitch (joint 5,
        +-70 deg) cannot hold a vertical gripper high above the table, but leaning the gripper this
        way keeps poses reachable."""
        base = self.rig.config.arms[side].xyz
        return float(np.arctan2(point[1] - base[1], point[0] - base[0]))

    # ----- joint-space and Cartesian motion ----------------------------------------------------------
    def _run(self, plans: dict[str, np.ndarray]) -> None:
        """Step through per-arm waypoint arrays (7 values each) together; shorter plans hold."""
        length = max(len(p) for p in plans.values())
        for i in range(length):
            action = self.env.hold_action()
            for side, plan in plans.items():
                action[arm_slice(side)] = plan[min(i, len(plan) - 1)]
            self.env.step(action)

    def _joint_plan(self, side: str, goal7: np.ndarray, min_duration: float = 0.0) -> np.ndarray:
        start = self.env.arm_command(side)
        return quintic_trajectory(start, goal7, self.rig.control_dt, self.max_velocity,
                                  self.max_acceleration, min_duration)

    def solve(self, side: str, target, seed=None) -> np.ndarray:
        """IK for one of the candidate TCP poses (a 4x4 or a list), nearest the seed; raises Unreachable."""
        candidates = [target] if isinstance(target, np.ndarray) else list(target)
        seed = self.env.arm_command(side)[:6] if seed is None else seed
        best, errors = None, []
        for candidate in candidates:
            try:
                q = self.ik[side].solve(candidate, seed=seed).qpos
            except IKError as error:
                errors.append(str(error))
                continue
            if best is None or np.abs(q - seed).sum() < np.abs(best - seed).sum():
                best = q
        if best is None:
            raise Unreachable(errors[0] if errors else f"{side}: no candidate pose")
        return best

    def move_to(self, side: str, target, gripper: float | None = None, min_duration: float = 0.3) -> None:
        """Free joint-space move of the TCP to `target` (a pose or candidate poses)."""
        self.move_both({side: target}, {side: gripper} if gripper is not None else None, min_duration)

    def move_both(self, targets: dict[str, object], grippers: dict[str, float] | None = None,
                  min_duration: float = 0.3) -> None:
        """Move several arms at once, arriving together."""
        goals = {}
        for side, target in targets.items():
            goal = self.env.arm_command(side).copy()
            goal[:6] = self.solve(side, target)
            if grippers and side in grippers:
                goal[6] = grippers[side]
            goals[side] = goal
        duration = max(min_duration, *(len(self._joint_plan(s, g)) * self.rig.control_dt for s, g in goals.items()))
        self._run({side: self._joint_plan(side, goal, duration) for side, goal in goals.items()})

    def move_joints(self, side: str, qpos6, min_duration: float = 0.3) -> None:
        goal = self.env.arm_command(side).copy()
        goal[:6] = qpos6
        self._run({side: self._joint_plan(side, goal, min_duration)})

    def _linear_plan(self, side: str, target, speed: float) -> np.ndarray:
        """Waypoints along a straight TCP line to the first candidate pose reachable all the way."""
        candidates = [target] if isinstance(target, np.ndarray) else list(target)
        errors = []
        for candidate in candidates:
            try:
                return self._line(side, candidate, speed)
            except Unreachable as error:
                errors.append(str(error))
        raise Unreachable(errors[0])

    def _line(self, side: str, target: np.ndarray, speed: float) -> np.ndarray:
        start = self._commanded_tcp(side)
        distance = np.linalg.norm(target[:3, 3] - start[:3, 3])
        angle = rotation_angle(start[:3, :3], target[:3, :3])
        duration = max(0.2, 15 / 8 * max(distance / (LINEAR_SPEED * speed * self.speed), angle / 1.5))
        while True:
            steps = max(2, int(np.ceil(duration / self.rig.control_dt)))
            t = np.arange(1, steps + 1) / steps
            s = 10 * t**3 - 15 * t**4 + 6 * t**5
            seed = self.env.arm_command(side)[:6]
            plan = []
            for fraction in s:
                waypoint = np.eye(4)
                waypoint[:3, 3] = start[:3, 3] + fraction * (target[:3, 3] - start[:3, 3])
                waypoint[:3, :3] = _interpolate_rotation(start[:3, :3], target[:3, :3], fraction)
                try:
                    seed = self.ik[side].solve(waypoint, seed=seed, restarts=0).qpos
                except IKError as error:
                    raise Unreachable(f"straight-line move: {error}") from error
                plan.append(seed)
            plan = np.asarray(plan)
            previous = np.vstack([self.env.arm_command(side)[:6], plan[:-1]])
            joint_speed = np.abs(plan - previous).max() / self.rig.control_dt
            if joint_speed <= self.max_velocity[0] * 1.5 or duration > 20:
                break
            duration *= 1.5
        gripper = np.full((len(plan), 1), self.env.arm_command(side)[6])
        return np.hstack([plan, gripper])

    def move_linear(self, side: str, target, speed: float = 1.0) -> None:
        """Move the TCP along a straight line (approach, descend, lift), orientation interpolated.

        `target` is a pose or candidate poses (e.g. from `tilted`); the first reachable one is used.
        """
        self._run({side: self._linear_plan(side, target, speed)})

    def move_linear_both(self, targets: dict[str, object], speed: float = 1.0) -> None:
        self._run({side: self._linear_plan(side, target, speed) for side, target in targets.items()})

    def tilted(self, side: str, target: np.ndarray, tilts=None) -> list[np.ndarray]:
        """`target`, then copies whose approach axis leans further outwards (see `outward_yaw`)."""
        tilts = TILTS if tilts is None else tilts
        lean = self.outward_yaw(side, target[:3, 3])
        axis = np.cross([np.cos(lean), np.sin(lean), 0.0], [0.0, 0.0, 1.0])
        k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        out = []
        for tilt in tilts:
            rotation = np.eye(3) + np.sin(tilt) * k + (1 - np.cos(tilt)) * k @ k
            out.append(pose(target[:3, 3], rotation @ target[:3, :3]))
        return out

    def _commanded_tcp(self, side: str) -> np.ndarray:
        return self.ik[side].fk(self.env.arm_command(side)[:6])

    def set_gripper(self, side: str, opening: float, duration: float = 0.5) -> None:
        goal = self.env.arm_command(side).copy()
        goal[6] = opening
        self._run({side: self._joint_plan(side, goal, duration / max(self.speed, 1e-3))})

    def wait(self, seconds: float) -> None:
        for _ in range(max(1, round(seconds / self.rig.control_dt))):
            self.env.step(self.env.hold_action())

    # ----- manipulation ---------------------------------------------------------------------------
    def finger_names(self, side: str) -> set[str]:
        return {f"{side}_link7", f"{side}_link8"}

    def touching(self, side: str, name: str) -> bool:
        return self.env.contacts_between(self.finger_names(side), {name}) > 0

    def grasp_candidates(self, side: str, position, yaw: float | None) -> list[np.ndarray]:
        """Top-down grasps at `position`, both finger orders (any yaw if None), upright first, then
        leaning outwards (see `outward_yaw`)."""
        lean = self.outward_yaw(side, position)
        yaws = [0.0, np.pi / 2, np.pi, -np.pi / 2] if yaw is None else [yaw, yaw + np.pi]
        return [pose(position, top_down(y, tilt, lean)) for tilt in TILTS for y in yaws]

    @_skill
    def grasp(self, side: str, name: str, height: float | None = None, yaw: float | None = None,
              opening: float = 0.07, approach: float = 0.08, squeeze: float = 0.0) -> None:
        """Approach from above, descend, close on `name` at `height` above its base (default: its middle).

        Raises GraspFailed when the fingers close on nothing or do not touch the object.
        """
        obj = self.env.object(name)
        base = obj.pose()[:3, 3]
        grasp_point = base + [0, 0, obj.height / 2 if height is None else height]
        for candidate in self.grasp_candidates(side, grasp_point, yaw):
            above = candidate.copy()
            above[:3, 3] += -candidate[:3, 2] * approach
            try:
                self.solve(side, [candidate])
                self.move_to(side, [above], gripper=opening)
                break
            except Unreachable:
                continue
        else:
            raise Unreachable(f"{side} arm: no grasp of {name} at {np.round(grasp_point, 3).tolist()} is reachable")
        self.move_linear(side, candidate, speed=0.6)
        self.set_gripper(side, squeeze, duration=0.6)
        self.wait(0.1)
        if self.gripper_opening(side) < CLOSED_EMPTY or not self.touching(side, name):
            self.env.note("grasp_failed", side=side, object=name, opening=self.gripper_opening(side))
            raise GraspFailed(f"{side} gripper closed on nothing where {name} was expected")
        self.held[side] = name

    @_skill
    def lift(self, side: str, height: float = 0.1) -> None:
        """Raise the TCP straight up; raises GraspSlipped if the held object stays behind."""
        name = self.held[side]
        start_z = self.env.object(name).pose()[2, 3] if name else None
        target = self._commanded_tcp(side)
        target[2, 3] += height
        self.move_linear(side, self.tilted(side, target), speed=0.6)
        if name is not None:
            risen = self.env.object(name).pose()[2, 3] - start_z
            if risen < 0.5 * height:
                self.held[side] = None
                self.env.note("grasp_slipped", side=side, object=name, risen=float(risen))
                raise GraspSlipped(f"{name} slipped out of the {side} gripper (rose {risen * 100:.1f} cm of {height * 100:.0f})")

    @_skill
    def release(self, side: str, opening: float = 0.07, retreat: float = 0.06) -> None:
        """Open the gripper, then back off along the approach axis."""
        self.set_gripper(side, opening, duration=0.4)
        self.held[side] = None
        if retreat:
            target = self._commanded_tcp(side)
            target[:3, 3] -= target[:3, 2] * retreat
            self.move_linear(side, self.tilted(side, target, tilts=(0.0, 0.3, 0.5)))

    @_skill
    def place(self, side: str, bottom_target, clearance: float = 0.005, hover: float = 0.08,
              release: bool = True) -> None:
        """Carry the held object so its bottom centre lands on `bottom_target` (world xyz), then let go.

        The TCP keeps the offset to the object it had when grasped, so an off-centre grip places right.
        """
        name = self.held[side]
        if name is None:
            raise GraspFailed(f"{side} arm holds nothing to place")
        obj = self.env.object(name)
        tcp = self.tcp(side)
        lowest = obj.center() - [0, 0, obj.height / 2]  # the held object's bottom, however it turned
        offset = tcp[:3, 3] - lowest  # in world axes
        goal = np.asarray(bottom_target, dtype=float) + [0, 0, clearance]
        above = tcp.copy()
        above[:3, 3] = goal + offset + [0, 0, hover]
        self.move_to(side, self.tilted(side, above))
        down = self._commanded_tcp(side)
        down[:3, 3] = goal + offset
        self.move_linear(side, down, speed=0.5)
        if release:
            self.release(side)

    @_skill
    def push(self, side: str, start, end, yaw: float = 0.0, opening: float = 0.0) -> None:
        """Put the closed gripper at `start` (TCP position) and push it in a straight line to `end`."""
        rotation = top_down(yaw)
        start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        approach = pose(start + [0, 0, 0.08], rotation)
        self.move_to(side, [approach, pose(approach[:3, 3], top_down(yaw + np.pi))], gripper=opening)
        rotation = self._commanded_tcp(side)[:3, :3]
        self.move_linear(side, pose(start, rotation), speed=0.6)
        self.move_linear(side, pose(end, rotation), speed=0.4)

    @_skill
    def strike(self, side: str, point, times: int = 2, lift: float = 0.1, speed: float = 1.6,
               tilts=None) -> None:
        """Hit `point` (world xyz) from above with the closed gripper, `times` times.

        With `tilts` (rad, e.g. TILTS), the gripper may lean outwards (see `outward_yaw`) by the
        first of them at which the whole stroke, from `lift` above down to the point, is reachable.
        """
        point = np.asarray(point, dtype=float)
        above = [pose(point + [0, 0, lift], top_down(y)) for y in (0.0, np.pi)]
        if tilts is not None:
            above = self._reachable_stroke(side, point, lift, tilts)
        self.move_to(side, above, gripper=0.0)
        rotation = self._commanded_tcp(side)[:3, :3]
        for _ in range(times):
            self.move_linear(side, pose(point - [0, 0, 0.01], rotation), speed=speed)
            self.move_linear(side, pose(point + [0, 0, lift], rotation), speed=speed)
            self.wait(0.15)

    def _reachable_stroke(self, side: str, point: np.ndarray, lift: float, tilts) -> list[np.ndarray]:
        """Start poses (`lift` above `point`) of the least-leaning vertical stroke reachable at both ends."""
        lean = self.outward_yaw(side, point)
        for tilt in tilts:
            rotations = [top_down(y, tilt, lean) for y in (0.0, np.pi)]
            reachable = []
            for rotation in rotations:
                try:
                    self.solve(side, [pose(point - [0, 0, 0.01], rotation)])
                    self.solve(side, [pose(point + [0, 0, lift], rotation)])
                except Unreachable:
                    continue
                reachable.append(pose(point + [0, 0, lift], rotation))
            if reachable:
                return reachable
        raise Unreachable(f"{side} arm: no stroke onto {np.round(point, 3).tolist()} is reachable at tilts {list(tilts)}")

    @_skill
    def home(self, sides=SIDES) -> None:
        """Both (or the named) arms back to the rig's rest pose."""
        rest = np.array(self.rig.config.rest_qpos)
        goals = {}
        for side in sides:
            goal = self.env.arm_command(side).copy()
            goal[:6] = rest
            goals[side] = goal
        duration = max(len(self._joint_plan(s, g)) for s, g in goals.items()) * self.rig.control_dt
        self._run({side: self._joint_plan(side, goal, duration) for side, goal in goals.items()})


def _interpolate_rotation(a: np.ndarray, b: np.ndarray, fraction: float) -> np.ndarray:
    """Rotation a -> b at `fraction` along the geodesic (axis-angle)."""
    relative = a.T @ b
    angle = rotation_angle(np.eye(3), relative)
    if angle < 1e-9:
        return a
    axis = np.array([relative[2, 1] - relative[1, 2], relative[0, 2] - relative[2, 0], relative[1, 0] - relative[0, 1]])
    norm = np.linalg.norm(axis)
    if norm < 1e-9:  # 180 deg: any perpendicular axis through the symmetric part
        values, vectors = np.linalg.eigh(relative + relative.T)
        axis = vectors[:, np.argmax(values)]
    else:
        axis /= norm
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    theta = angle * fraction
    return a @ (np.eye(3) + np.sin(theta) * k + (1 - np.cos(theta)) * k @ k)
