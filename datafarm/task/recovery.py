"""Recovery episodes: the world disturbs the expert once, and the expert recovers from where it is left.

Two kinds, each a `Disturbance` drawn per episode from the seed (see `sample_disturbance`):

- **push**: while an arm moves and nothing has been handled yet, a person shoves it off its path (up
  to about 14 cm, in a random direction). The arm's drives follow the shove, so the arm moves through
  the physics (it can knock what it meets) and stays where it was pushed.
- **misgrasp**: at the first grasp, just before the fingers close, a person takes the object away
  and sets it down elsewhere (up to about 38 cm, at a place some arm can grasp it). The fingers close
  on nothing.

The disturbance runs inside `TaskEnv.step`, whatever skill or code the expert moves with, as steps of its
own; then `Disturbed` is raised into the expert's code and the episode runs the expert again from the
disturbed state (datafarm.task.rollout). Only that continuation is the expert's demonstration: the
episode records `demonstration_start`, the first frame after the disturbance, and the harvest keeps
the frames from there on, so no disturbance step is ever labelled as an expert action.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from datafarm.scene.spec import footprint_radius
from datafarm.sim.ik import ArmIK, IKError
from datafarm.sim.spaces import SIDES, arm_slice
from datafarm.sim.trajectory import quintic_trajectory
from datafarm.task.package import RecoveryKind

if TYPE_CHECKING:
    from datafarm.task.env import TaskEnv

log = logging.getLogger(__name__)

PUSH_SECONDS = 0.4  # a shove, not a slow guide
LET_GO_SECONDS = 0.2  # the person's hand leaves the arm before the expert acts again
HANDS_OFF_DISTANCE = 0.06  # m: a TCP nearer an object than this may be about to handle it
MIN_TCP_HEIGHT = 0.06  # m above the table: a push never drives the gripper into it
BASE_CLEARANCE = 0.22  # m: no object is set down nearer an arm's base than this
GRASP_REACH = 0.04  # m beyond an object's footprint radius: a TCP this near, closing its fingers, grasps it
GRASP_APPROACH = 0.08  # m: a grasp is reachable when the pose this far back along the gripper axis is too


class Disturbed(BaseException):
    """Raised into the expert's code after a disturbance. A BaseException, like KeyboardInterrupt, so an
    expert's own `except Exception` cannot swallow it: the episode, not the expert, decides what follows."""

    def __init__(self, record: dict):
        super().__init__(f"{record['kind']} disturbance at step {record['at_step']}")
        self.record = record


@dataclass(frozen=True)
class Disturbance:
    """One episode's disturbance, as drawn from its seed.

    `direction` is a unit vector: the push's direction in the world (x, y, z), or the relocation's
    horizontal direction (x, y, 0). `distance` is how far (m). `choice` in [0, 1) picks among arms
    when both could be pushed. A push waits for `earliest_step`; a misgrasp comes at the first grasp.
    """

    kind: RecoveryKind
    earliest_step: int
    direction: tuple[float, float, float]
    distance: float
    choice: float

    def to_dict(self) -> dict:
        return asdict(self)


def sample_disturbance(rng: np.random.Generator, kinds: list[RecoveryKind], push_distance: tuple[float, float],
                       relocation_distance: tuple[float, float], window: tuple[float, float],
                       control_hz: int) -> Disturbance:
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "push":
        heading = rng.uniform(0, 2 * np.pi)
        rise = rng.uniform(-0.3, 0.6)  # mostly sideways, sometimes up, rarely down (the table is below)
        direction = np.array([np.cos(heading), np.sin(heading), rise])
        distance = rng.uniform(*push_distance)
    else:
        heading = rng.uniform(0, 2 * np.pi)
        direction = np.array([np.cos(heading), np.sin(heading), 0.0])
        distance = rng.uniform(*relocation_distance)
    direction /= np.linalg.norm(direction)
    return Disturbance(kind, int(rng.uniform(*window) * control_hz), tuple(direction.tolist()), float(distance),
                       float(rng.random()))


@dataclass(frozen=True)
class Obstacle:
    """Something a relocated object must not be set down on: a centre on the table and a radius (m)."""

    x: float
    y: float
    radius: float


class Disturber:
    """Carries out one episode's `Disturbance` through a `TaskEnv` (which calls it); at most once."""

    def __init__(self, disturbance: Disturbance, obstacles: dict[str, Obstacle],
                 table: tuple[float, float, float, float]):
        self.disturbance = disturbance
        self.obstacles = obstacles  # fixtures and objects as placed, by name
        self.table = table  # x_min, x_max, y_min, y_max of where an object may be set down
        self.done = False
        self._ik: dict[str, ArmIK] = {}
        self._touched = False  # the robot has touched an object or fixture: the task has begun

    def _handled(self, env: TaskEnv) -> bool:
        """Whether the robot has touched anything of the task yet (a fixture too: a drum, a towel, a drawer).
        Until then the expert's plan holds nothing the push could break off."""
        if not self._touched:
            robot = {link.name for arm in env.rig.arms.values() for link in arm.articulation.links}
            task = {*env.scene.objects, *(n for f in env.scene.fixtures.values() for n in f.entity_names())}
            self._touched = env.contacts_between(robot, task) > 0
        return self._touched

    # ----- the hook TaskEnv.step calls ----------------------------------------------------------------
    def before_step(self, env: TaskEnv, action: np.ndarray) -> None:
        """Carry out the disturbance if `action` (the expert's next) is its moment; may raise Disturbed."""
        if self.done:
            return
        if self.disturbance.kind == "push":
            self._maybe_push(env, action)
        else:
            self._maybe_misgrasp(env, action)

    def _maybe_push(self, env: TaskEnv, action: np.ndarray) -> None:
        """Push an arm the expert is moving, once the moment has come and nothing is handled yet."""
        d = self.disturbance
        if self._handled(env) or env.rig.step_count < d.earliest_step or not _hands_off(env):
            return
        moving = [s for s in SIDES if np.abs(action[arm_slice(s)][:6] - env.arm_command(s)[:6]).max() > 1e-4]
        if not moving:
            return
        side = moving[int(d.choice * len(moving))]
        goal = self._pushed_joints(env, side)
        if goal is None:
            return  # no reachable pose that far from here in any direction: try again next step
        self.done = True
        start_step, start = env.rig.step_count, env.rig.tcp_pose(side)[:3, 3]
        target = env.arm_command(side).copy()
        target[:6] = goal
        arm = env.rig.arms[side]
        self._follow(env, side, quintic_trajectory(env.arm_command(side), target, env.rig.control_dt,
                                                   arm.max_velocity, 10.0, PUSH_SECONDS))
        moved = env.rig.tcp_pose(side)[:3, 3] - start
        self._raise(env, {"kind": "push", "side": side, "at_step": start_step, "drawn_m": round(d.distance, 4),
                          "displacement_m": np.round(moved, 4).tolist(),
                          "distance_m": round(float(np.linalg.norm(moved)), 4)})

    def _maybe_misgrasp(self, env: TaskEnv, action: np.ndarray) -> None:
        """At the first grasp (fingers starting to close at an untouched object, whatever skill or code
        closes them): take the object away, then close the fingers on nothing."""
        if not _untouched(env):
            return
        for side in SIDES:
            if action[arm_slice(side)][6] >= env.arm_command(side)[6] - 1e-4:
                continue  # not closing
            tcp = env.rig.tcp_pose(side)[:3, 3]
            near = [o for o in env.scene.objects.values() if not o.spec.static
                    and np.linalg.norm(o.center() - tcp) < footprint_radius(o.spec) + GRASP_REACH]
            if near:
                self._misgrasp(env, side, min(near, key=lambda o: np.linalg.norm(o.center() - tcp)).name)
                return

    def _misgrasp(self, env: TaskEnv, side: str, name: str) -> None:
        self.done = True
        obj = env.object(name)
        before = obj.pose()
        place = self._relocation(env, name, env.rig.tcp_pose(side))
        if place is None:
            env.note("disturbance_skipped", recovery={"kind": "misgrasp", "object": name,
                                                      "reason": "no free place an arm can grasp at"})
            return
        moved = before.copy()
        moved[:2, 3] = place
        obj.set_pose(moved)  # it was at rest (untouched), so it rests where it is set down
        start_step = env.rig.step_count
        closed = env.arm_command(side).copy()
        closed[6] = 0.0
        arm = env.rig.arms[side]
        self._follow(env, side, quintic_trajectory(env.arm_command(side), closed, env.rig.control_dt,
                                                   arm.max_velocity, 10.0, PUSH_SECONDS))
        self._raise(env, {"kind": "misgrasp", "side": side, "object": name, "at_step": start_step,
                          "from_xy": np.round(before[:2, 3], 4).tolist(), "to_xy": np.round(place, 4).tolist(),
                          "distance_m": round(float(np.linalg.norm(place - before[:2, 3])), 4)})

    # ----- the disturbance's own steps -------------------------------------------------------------
    def _follow(self, env: TaskEnv, side: str, plan: np.ndarray) -> None:
        """Step the world with `side` following `plan` (the other arm holds), then the hand lets go."""
        for waypoint in plan:
            action = env.hold_action()
            action[arm_slice(side)] = waypoint
            env.advance(action)
        for _ in range(round(LET_GO_SECONDS / env.rig.control_dt)):
            env.advance(env.hold_action())

    def _raise(self, env: TaskEnv, record: dict) -> None:
        record["demonstration_start"] = env.rig.step_count
        env.record_disturbance(record)
        log.debug("disturbance %s", record)
        raise Disturbed(record)

    # ----- where to ---------------------------------------------------------------------------------
    def ik(self, env: TaskEnv, side: str) -> ArmIK:
        if side not in self._ik:
            self._ik[side] = ArmIK.for_arm(env.rig, side)
        return self._ik[side]

    def _pushed_joints(self, env: TaskEnv, side: str) -> np.ndarray | None:
        """Joints with the TCP moved by the drawn push, or a turned / shorter one where that is unreachable."""
        d = self.disturbance
        seed = env.arm_command(side)[:6]
        tcp = self.ik(env, side).fk(seed)
        floor = env.rig.config.table.height + MIN_TCP_HEIGHT
        for scale in (1.0, 0.75, 0.5):
            for turn in np.radians([0, 90, 180, 270]):
                c, s = np.cos(turn), np.sin(turn)
                x, y, z = d.direction
                offset = d.distance * scale * np.array([c * x - s * y, s * x + c * y, z])
                target = tcp.copy()
                target[:3, 3] += offset
                target[2, 3] = max(target[2, 3], floor)
                try:
                    return self.ik(env, side).solve(target, seed=seed, restarts=2).qpos
                except IKError:
                    continue
        return None

    def _relocation(self, env: TaskEnv, name: str, grasp: np.ndarray) -> np.ndarray | None:
        """A free place on the table, the drawn distance away (shorter if need be), where some arm reaches
        the grasp the expert was closing (`grasp`, a TCP pose), moved along with the object."""
        d = self.disturbance
        obj = env.object(name)
        start = obj.pose()[:2, 3]
        radius = footprint_radius(obj.spec)
        x_min, x_max, y_min, y_max = self.table
        for scale in (1.0, 0.8, 0.6, 0.4):
            for turn in np.radians(np.arange(0, 360, 30)):
                c, s = np.cos(turn), np.sin(turn)
                x, y, _ = d.direction
                place = start + d.distance * scale * np.array([c * x - s * y, s * x + c * y])
                if not (x_min + radius <= place[0] <= x_max - radius and y_min + radius <= place[1] <= y_max - radius):
                    continue
                if any(np.hypot(*(place - [o.x, o.y])) < o.radius + radius + 0.02
                       for other, o in self._obstacles_now(env).items() if other != name):
                    continue
                if min(np.hypot(*(env.rig.tcp_pose(s)[:2, 3] - place)) for s in SIDES) < 2 * HANDS_OFF_DISTANCE:
                    continue  # not under a gripper
                if min(np.hypot(*(np.asarray(env.rig.config.arms[s].xyz[:2]) - place)) for s in SIDES) < BASE_CLEARANCE:
                    continue  # not at an arm's foot, where the gripper must fold back on itself
                if self._reachable(env, grasp, place - start):
                    return place
        return None

    def _reachable(self, env: TaskEnv, grasp: np.ndarray, shift: np.ndarray) -> bool:
        """Whether an arm reaches `grasp` moved by `shift` (x, y), and its approach from above, with either
        finger order."""
        for flip in (np.diag([1.0, 1.0, 1.0]), np.diag([-1.0, -1.0, 1.0])):
            target = grasp.copy()
            target[:2, 3] += shift
            target[:3, :3] = grasp[:3, :3] @ flip
            above = target.copy()
            above[:3, 3] -= target[:3, 2] * GRASP_APPROACH
            for side in SIDES:
                try:
                    for pose in (target, above):
                        self.ik(env, side).solve(pose, seed=env.arm_command(side)[:6], restarts=2)
                    return True
                except IKError:
                    continue
        return False

    def _obstacles_now(self, env: TaskEnv) -> dict[str, Obstacle]:
        """The placed fixtures and objects, objects where they are now."""
        now = dict(self.obstacles)
        for name, obj in env.scene.objects.items():
            centre = obj.center()
            now[name] = Obstacle(float(centre[0]), float(centre[1]), footprint_radius(obj.spec))
        return now


def _untouched(env: TaskEnv) -> bool:
    """Every movable object is still where the episode started it: nothing has been handled yet."""
    for name, obj in env.scene.objects.items():
        if not obj.spec.static and np.linalg.norm(obj.pose()[:3, 3] - env.trace.poses[name][0][:3, 3]) > 0.005:
            return False
    return True


def _hands_off(env: TaskEnv) -> bool:
    """Nothing handled yet and no gripper about to handle anything: a push cannot tear an object along."""
    if not _untouched(env):
        return False
    return all(np.linalg.norm(env.rig.tcp_pose(side)[:3, 3] - obj.center()) > HANDS_OFF_DISTANCE
               for side in SIDES for obj in env.scene.objects.values() if not obj.spec.static)
