"""The safety layer: every 14-D command to the arms passes it, on the real PiPER driver and the simulated one.

Per control tick, a policy's target (6 joints + gripper opening per arm, left first, rad / m) and the
measured joint state go in; a command comes out, or :class:`datafarm.errors.SafetyStop` is raised and
nothing may be sent. In order:

1. **finite**: a target with NaN or inf stops both arms;
2. **jump**: a joint target more than ``stop_jump_rad`` from the measured joint is a policy gone wrong
   (the expert never asks for that): stop;
3. **limits**: each joint is clipped to piper_sdk's limits intersected with our URDF's, the gripper to
   the SDK's 0-70 mm; a clipped value is reported, never sent;
4. **change cap**: each joint moves at most ``max_step_rad`` per tick from the previous command (the
   gripper ``max_gripper_step_m``). After :meth:`SafetyLayer.reset` the previous command is the
   measured pose, so the first motion after enable is a slow ramp from where the arm is;
5. **workspace box**: the command's TCP (forward kinematics, rig frame) must stay in that arm's box
   (above the table top, within its extent plus a margin); a command leaving it is replaced by the
   previous one (the arm holds) and reported; ``stop_after_box_holds`` holds in a row stop.

The layer is pure computation (no I/O): the driver sends what it returns and stops on what it raises.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from datafarm.errors import SafetyStop
from datafarm.robot import ArmModel, load_arm_model
from datafarm.robot.kinematics import flange_pose
from datafarm.sim.config import RigConfig, load_rig_config
from datafarm.sim.spaces import AXIS_NAMES, DOF, JOINTS_PER_ARM, SIDES, arm_slice

log = logging.getLogger(__name__)

GRIPPER_RANGE_M = (0.0, 0.07)  # piper_sdk's gripper range: two fingers x 35 mm


class SafetyConfig(BaseModel):
    """The limits; conservative defaults (30 Hz: 0.02 rad a tick is 0.6 rad/s)."""

    model_config = ConfigDict(extra="forbid")
    max_step_rad: float = Field(0.02, gt=0, description="largest joint change per tick")
    max_gripper_step_m: float = Field(0.004, gt=0, description="largest gripper change per tick")
    stop_jump_rad: float = Field(1.0, gt=0, description="a target this far from the measured joint stops both arms")
    box_margin_m: float = Field(0.05, ge=0, description="the box extends this far beyond the table's edges")
    box_floor_m: float = Field(0.005, description="lowest TCP height above the table top")
    box_ceiling_m: float = Field(0.45, gt=0, description="highest TCP height above the table top")
    stop_after_box_holds: int = Field(30, gt=0, description="holds in a row (at the box's wall) that stop")


def sdk_joint_limits() -> np.ndarray:
    """(6, 2) joint limits (rad) from piper_sdk's own parameter manager."""
    from piper_sdk.piper_param import C_PiperParamManager

    manager = C_PiperParamManager()
    return np.array([manager.GetJointLimitParam(f"j{i}") for i in range(1, JOINTS_PER_ARM + 1)], dtype=float)


def joint_limits(model: ArmModel) -> np.ndarray:
    """(6, 2): the SDK's limits intersected with our URDF's (both must hold)."""
    sdk = sdk_joint_limits()
    urdf = np.array([joint.limit for joint in model.arm_joints], dtype=float)
    limits = np.stack([np.maximum(sdk[:, 0], urdf[:, 0]), np.minimum(sdk[:, 1], urdf[:, 1])], axis=1)
    if np.any(limits[:, 0] > limits[:, 1]):
        raise ValueError(f"the SDK's and the URDF's joint limits do not overlap: {sdk} vs {urdf}")
    return limits


@dataclass
class SafeCommand:
    """What to send this tick, and what the layer changed (one line each, for the log and the plot)."""

    command: np.ndarray  # (14,)
    events: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.events)


class SafetyLayer:
    """Filters each tick's 14-D target; ``reset(measured)`` before the first command after enable."""

    def __init__(self, config: SafetyConfig | None = None, rig: RigConfig | None = None,
                 model: ArmModel | None = None):
        self.config = config or SafetyConfig()
        self.rig = rig or load_rig_config()
        self.model = model or load_arm_model(self.rig.robot)
        limits = joint_limits(self.model)
        self.lower = np.concatenate([np.append(limits[:, 0], GRIPPER_RANGE_M[0])] * len(SIDES))
        self.upper = np.concatenate([np.append(limits[:, 1], GRIPPER_RANGE_M[1])] * len(SIDES))
        step = np.append(np.full(JOINTS_PER_ARM, self.config.max_step_rad), self.config.max_gripper_step_m)
        self.max_step = np.concatenate([step] * len(SIDES))
        self._previous: np.ndarray | None = None
        self._box_holds = 0

    def reset(self, measured: np.ndarray) -> None:
        """Start from the measured pose: the next commands ramp away from it at the change cap."""
        self._previous = self._state(measured).copy()
        self._box_holds = 0

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """The TCP's allowed region (rig frame): the table's extent plus the margin, floor to ceiling."""
        table, margin = self.rig.table, self.config.box_margin_m
        half = np.array(table.size) / 2 + margin
        low = np.array([table.center[0] - half[0], table.center[1] - half[1], table.height + self.config.box_floor_m])
        high = np.array([table.center[0] + half[0], table.center[1] + half[1], table.height + self.config.box_ceiling_m])
        return low, high

    def tcp_position(self, side: str, joints: np.ndarray) -> np.ndarray:
        """Where the TCP is for these six joint values (rig frame), by our forward kinematics."""
        offset = np.eye(4)
        offset[:3, 3] = self.model.tcp_offset
        return (self.rig.arms[side].matrix() @ flange_pose(self.model, joints) @ offset)[:3, 3]

    def filter(self, target, measured) -> SafeCommand:
        """The command to send for `target` given the `measured` state; raises SafetyStop."""
        measured = self._state(measured)
        target = np.asarray(target, dtype=np.float64).reshape(-1)
        if target.shape != (DOF,):
            raise SafetyStop(f"a command has {DOF} values {list(AXIS_NAMES)}, got {target.shape}: stopped")
        if not np.all(np.isfinite(target)):
            bad = [AXIS_NAMES[i] for i in np.flatnonzero(~np.isfinite(target))]
            raise SafetyStop(f"the policy's command is not finite at {bad}: both arms stopped")
        jump = np.abs(target - measured)
        jump[[arm_slice(side).stop - 1 for side in SIDES]] = 0.0  # grippers: the range clip covers them
        if jump.max() > self.config.stop_jump_rad:
            worst = int(np.argmax(jump))
            raise SafetyStop(f"the policy asked {AXIS_NAMES[worst]} to jump {jump[worst]:.2f} rad from where it is "
                             f"(limit {self.config.stop_jump_rad} rad): both arms stopped")
        if self._previous is None:
            self.reset(measured)
        events = []
        clipped = np.clip(target, self.lower, self.upper)
        for i in np.flatnonzero(clipped != target):
            events.append(f"{AXIS_NAMES[i]} {target[i]:.3f} clipped to its limit {clipped[i]:.3f}")
        capped = np.clip(clipped, self._previous - self.max_step, self._previous + self.max_step)
        if np.any(capped != clipped):
            events.append(f"change capped on {[AXIS_NAMES[i] for i in np.flatnonzero(capped != clipped)]}")
        command = self._inside_box(capped, events)
        self._previous = command
        for event in events:
            log.debug("safety: %s", event)
        return SafeCommand(command, events)

    def _inside_box(self, command: np.ndarray, events: list[str]) -> np.ndarray:
        low, high = self.box()
        outside = []
        for side in SIDES:
            tcp = self.tcp_position(side, command[arm_slice(side)][:JOINTS_PER_ARM])
            if np.any(tcp < low) or np.any(tcp > high):
                outside.append(f"{side} TCP {np.round(tcp, 3).tolist()}")
        if not outside:
            self._box_holds = 0
            return command
        self._box_holds += 1
        if self._box_holds >= self.config.stop_after_box_holds:
            raise SafetyStop(f"the policy kept pushing out of the workspace box ({'; '.join(outside)}) for "
                             f"{self._box_holds} ticks: both arms stopped")
        events.append(f"held: the command would take the {'; '.join(outside)} out of the workspace box")
        return self._previous.copy()

    @staticmethod
    def _state(measured) -> np.ndarray:
        measured = np.asarray(measured, dtype=np.float64).reshape(-1)
        if measured.shape != (DOF,) or not np.all(np.isfinite(measured)):
            raise SafetyStop(f"the measured state is not {DOF} finite values ({measured.shape}): both arms stopped")
        return measured
