"""The environment an expert acts in: the rig, the built scene, the trace, limits and perturbations.

Everything moves through `step(action)`: it steps the rig (recording cameras when a recorder is
attached), appends the trace row, applies any scheduled perturbation, and enforces the episode's
step limit; a recovery episode's disturbance (datafarm.task.recovery) comes in through it too. The
expert reads privileged simulator state (object poses, fixture states) from here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from datafarm.scene.builder import BuiltScene, SceneObject
from datafarm.scene.fixtures import Fixture
from datafarm.sim.recorder import EpisodeRecorder
from datafarm.sim.rig import DualArmRig, StepReport
from datafarm.sim.spaces import SIDES, arm_slice
from datafarm.task.trace import TraceRecorder

if TYPE_CHECKING:
    from datafarm.task.recovery import Disturber

log = logging.getLogger(__name__)


class EpisodeTimeout(RuntimeError):
    """The episode ran past its simulated-time or wall-clock limit."""


@dataclass(frozen=True)
class Perturbation:
    """A disturbance mid-episode, at control step `at_step`.

    kind "arm": the arm `target` ("left"/"right") is pushed by `offset` (six joint angles, rad); its
    drive pulls it back and the expert continues from there. kind "object": the object `target` is
    slid by `offset` (dx, dy in m) along its support, as a person nudging it would, but only while
    nothing has handled it yet (no gripper within reach, still where it started), so that the expert
    has to notice on its next look (or after a missed grasp) and go for it where it now is.
    """

    at_step: int
    kind: str
    target: str
    offset: tuple[float, ...]

    def to_dict(self) -> dict:
        return {"at_step": self.at_step, "kind": self.kind, "target": self.target, "offset": list(self.offset)}


class TaskEnv:
    def __init__(self, rig: DualArmRig, scene: BuiltScene, max_steps: int,
                 recorder: EpisodeRecorder | None = None, perturbations: list[Perturbation] | None = None,
                 disturber: Disturber | None = None):
        self.rig = rig
        self.scene = scene
        self.max_steps = max_steps
        self.recorder = recorder
        self.perturbations = sorted(perturbations or [], key=lambda p: p.at_step)
        self.trace = TraceRecorder()
        self.disturber = disturber  # a recovery episode's disturbance (datafarm.task.recovery)
        for fixture in scene.fixtures.values():
            rig.substep_hooks.append(fixture.after_substep)

    # ----- what the expert may read ------------------------------------------------------------
    def object(self, name: str) -> SceneObject:
        if name not in self.scene.objects:
            raise KeyError(f"no object {name!r}; the scene has {sorted(self.scene.objects)}")
        return self.scene.objects[name]

    def fixture(self, name: str) -> Fixture:
        if name not in self.scene.fixtures:
            raise KeyError(f"no fixture {name!r}; the scene has {sorted(self.scene.fixtures)}")
        return self.scene.fixtures[name]

    @property
    def time(self) -> float:
        return self.rig.time

    def contacts_between(self, names_a: set[str], names_b: set[str]) -> float:
        """Total contact impulse (N s, last substep) between entities named in the two sets."""
        total = 0.0
        for contact in self.rig.scene.get_contacts():
            first, second = (body.entity.name for body in contact.bodies)
            if (first in names_a and second in names_b) or (first in names_b and second in names_a):
                total += sum(float(np.linalg.norm(point.impulse)) for point in contact.points)
        return total

    def note(self, kind: str, **details) -> None:
        """Add an event (skill failure, recovery, ...) to the trace."""
        self.trace.events.append({"t": round(self.time, 4), "kind": kind, **details})

    # ----- acting ----------------------------------------------------------------------------------
    def step(self, action) -> StepReport:
        if self.disturber:
            self.disturber.before_step(self, np.asarray(action, dtype=float))  # may raise Disturbed
        return self.advance(action)

    def advance(self, action) -> StepReport:
        """One control step of the world, recorded, with no disturbance (the disturbance's own steps)."""
        if self.rig.step_count >= self.max_steps:
            raise EpisodeTimeout(f"episode reached its limit of {self.max_steps} steps "
                                 f"({self.max_steps * self.rig.control_dt:.1f} s simulated)")
        while self.perturbations and self.perturbations[0].at_step <= self.rig.step_count:
            self._apply(self.perturbations.pop(0))
        report = self.recorder.record(action) if self.recorder else self.rig.step(action)
        self._record_row()
        return report

    def record_disturbance(self, record: dict) -> None:
        """Note what a disturbance did, in the trace and in the recorded episode's metadata."""
        self.note("disturbance", recovery=record)
        if self.recorder:
            self.recorder.metadata["recovery"] = record

    def record_initial_state(self) -> None:
        self._record_row()

    def _record_row(self) -> None:
        self.trace.append(
            self.rig.time, self.rig.qpos(), np.stack([self.rig.tcp_pose(s)[:3, 3] for s in SIDES]),
            {name: obj.pose() for name, obj in self.scene.objects.items()},
            {name: fixture.state() for name, fixture in self.scene.fixtures.items()},
        )

    def _apply(self, perturbation: Perturbation) -> None:
        if perturbation.kind == "arm":
            arm = self.rig.arms[perturbation.target]
            state = arm.qpos()
            state[:6] = np.clip(state[:6] + np.asarray(perturbation.offset), arm.lower[:6], arm.upper[:6])
            arm.articulation.set_qpos(arm.to_joint_targets(state))  # the drive target stays: pulled back
        else:
            obj = self.object(perturbation.target)
            start = self.trace.poses[obj.name][0][:3, 3]
            pose = obj.pose()
            reach = min(np.linalg.norm(self.rig.tcp_pose(side)[:3, 3] - obj.center()) for side in SIDES)
            if np.linalg.norm(pose[:3, 3] - start) > 0.005 or reach < 0.12:
                self.note("perturbation_skipped", applied=perturbation.to_dict())
                return
            pose[:2, 3] += perturbation.offset[:2]
            obj.set_pose(pose)
        self.note("perturbation", applied=perturbation.to_dict())
        log.debug("perturbation %s", perturbation)

    def hold_action(self) -> np.ndarray:
        """The action that keeps every arm where it is now commanded."""
        return self.rig.drive_target()

    def arm_command(self, side: str) -> np.ndarray:
        return self.rig.drive_target()[arm_slice(side)]
