"""The dual PiPER as a lerobot Robot: lerobot's own tools drive it by name (`--robot.type=datafarm_piper`).

Features are the farm datasets' names and units, so a dataset lerobot-record writes with this robot has
the farm's layout: ``observation.state`` and ``action`` are 14 floats named
:data:`datafarm.sim.spaces.AXIS_NAMES` (left arm first; six joints in rad, then the gripper opening in
m), and the cameras head / left_wrist / right_wrist become ``observation.images.cam_high`` /
``cam_left_wrist`` / ``cam_right_wrist`` (:data:`datafarm.cameras.CAMERA_KEYS`).

Behind it is an :class:`~datafarm.piper.arm_pair.ArmPair`: :class:`~datafarm.piper.driver.PiperPair` on
two CAN ports, or :class:`~datafarm.piper.sim_pair.SimPair` on the SAPIEN rig when ``simulated`` is set.
Every action passes the pair's safety layer; a :class:`~datafarm.errors.SafetyStop` (bad action,
watchdog, missed deadline) has stopped both arms when it reaches lerobot, and they stay stopped
(``robot.pair.resume_after_estop(operator_confirmed=True)`` after the arms are supported).

The control deadline runs from one ``send_action`` to the next. Two ``get_observation`` calls with no
action between them mean the caller's loop paused (lerobot-record's reset phase without a
teleoperator): the arms are told to hold and the deadline is disarmed until the next action.

Calibration: nothing to do. The PiPER's joints have absolute encoders and its firmware reports
calibrated angles (zeros set at the factory, piper_sdk's ``dh_is_offset=1`` convention); there is no
range-of-motion recording as lerobot's feetech/dynamixel arms need, so ``is_calibrated`` is always true
and ``calibrate()`` only logs.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from lerobot.cameras import make_cameras_from_configs
from lerobot.robots.robot import Robot
from lerobot.utils.decorators import check_if_already_connected, check_if_not_connected

from datafarm.cameras import CAMERA_KEYS
from datafarm.errors import BadInput, SafetyStop
from datafarm.sim.spaces import AXIS_NAMES
from lerobot_robot_datafarm_piper.config_datafarm_piper import DatafarmPiperConfig

if TYPE_CHECKING:
    from datafarm.piper.arm_pair import ArmPair
    from datafarm.sim.rig import DualArmRig

log = logging.getLogger(__name__)


def observation_key(camera: str) -> str:
    """head -> cam_high: the name lerobot puts after ``observation.images.``, as in the farm's datasets."""
    return CAMERA_KEYS[camera].removeprefix("observation.images.")


class DatafarmPiper(Robot):
    """Two PiPERs (or their simulation) with up to three cameras, through DataFarm's safety layer."""

    config_class = DatafarmPiperConfig
    name = "datafarm_piper"

    def __init__(self, config: DatafarmPiperConfig, rig: DualArmRig | None = None):
        super().__init__(config)
        self.config = config
        self._rig = rig  # simulated: an existing rig (a trial's scene); else one is built on connect
        # Simulated cameras are rendered by the rig: no lerobot camera objects (nothing to open).
        self.cameras = {} if config.simulated else make_cameras_from_configs(config.cameras)
        self._pair: ArmPair | None = None
        self._last_call: str | None = None  # "observe" | "act": tells a paused loop from a running one

    # -- features ---------------------------------------------------------------------------------------
    @cached_property
    def observation_features(self) -> dict[str, type | tuple]:
        cameras = {observation_key(name): (cam.height, cam.width, 3) for name, cam in self.config.cameras.items()}
        return {**dict.fromkeys(AXIS_NAMES, float), **cameras}

    @cached_property
    def action_features(self) -> dict[str, type]:
        return dict.fromkeys(AXIS_NAMES, float)

    # -- life cycle -------------------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return self._pair is not None and all(cam.is_connected for cam in self.cameras.values())

    @property
    def pair(self) -> ArmPair:
        """The arm pair behind the robot (for the operator's emergency stop and resume)."""
        if self._pair is None:
            raise SafetyStop(f"{self} is not connected: call connect() first")
        return self._pair

    @check_if_already_connected
    def connect(self, calibrate: bool = True) -> None:
        pair = self._make_pair()
        pair.connect()
        try:
            if self.config.simulated:
                missing = sorted(set(self.config.cameras) - set(pair.rig.cameras))
                if missing:
                    raise BadInput(f"the simulated rig has no cameras {missing} (it has {sorted(pair.rig.cameras)}): "
                                   "name the robot's cameras like the rig's")
            for camera in self.cameras.values():
                camera.connect()
        except Exception:
            pair.disconnect()
            for camera in self.cameras.values():
                if camera.is_connected:
                    camera.disconnect()
            raise
        self._pair = pair
        self._last_call = None
        log.info("%s connected (%s)", self, "simulated" if self.config.simulated else
                 f"CAN {self.config.left_can}, {self.config.right_can}")

    @property
    def is_calibrated(self) -> bool:
        return True  # absolute encoders: see the module docstring

    def calibrate(self) -> None:
        log.info("%s: nothing to calibrate (the PiPER's joints have absolute encoders)", self)

    def configure(self) -> None:
        """Nothing: the speed percentage and control mode are set when the pair enables the arms."""

    @check_if_not_connected
    def get_observation(self) -> dict[str, Any]:
        pair = self.pair
        if self._last_call == "observe":
            pair.stop()  # no action since the last observation: the loop paused; hold, disarm the deadline
        observation: dict[str, Any] = dict(zip(AXIS_NAMES, map(float, pair.observe().position)))
        observation.update(self._images())
        self._last_call = "observe"
        return observation

    @check_if_not_connected
    def send_action(self, action: dict[str, Any]) -> dict[str, float]:
        missing = [name for name in AXIS_NAMES if name not in action]
        if missing:
            raise BadInput(f"the action lacks {missing}: a datafarm_piper action has the 14 values {list(AXIS_NAMES)} "
                           "(rad; gripper opening in m), as in the farm's datasets")
        target = np.array([float(action[name]) for name in AXIS_NAMES])
        safe = self.pair.act(target)
        self._last_call = "act"
        return dict(zip(AXIS_NAMES, map(float, safe.command)))

    @check_if_not_connected
    def disconnect(self) -> None:
        pair, self._pair = self._pair, None
        try:
            pair.stop()  # hold where the arms are (nothing if an emergency stop is latched)
        finally:
            pair.disconnect()
            for camera in self.cameras.values():
                if camera.is_connected:
                    camera.disconnect()
        log.info("%s disconnected", self)

    # -- internals --------------------------------------------------------------------------------------
    def _make_pair(self) -> ArmPair:
        safety = self.config.safety.to_safety_config()
        if self.config.simulated:
            from datafarm.piper.sim_pair import SimPair, SimPairConfig

            options: dict[str, Any] = {"rig": self.config.rig, "dry_run": self.config.dry_run, "safety": safety}
            if self.config.deadline_s is not None:
                options["deadline_s"] = self.config.deadline_s
            return SimPair(SimPairConfig(**options), rig=self._rig)
        from datafarm.piper.driver import PiperPair, PiperPairConfig, WatchdogConfig

        watchdog = WatchdogConfig() if self.config.deadline_s is None else WatchdogConfig(deadline_s=self.config.deadline_s)
        return PiperPair(PiperPairConfig(left_can=self.config.left_can, right_can=self.config.right_can,
                                         bustype=self.config.bustype, speed_pct=self.config.speed_pct,
                                         dry_run=self.config.dry_run, watchdog=watchdog, safety=safety))

    def _images(self) -> dict[str, np.ndarray]:
        if not self.config.cameras:
            return {}
        if not self.config.simulated:
            return {observation_key(name): camera.read_latest() for name, camera in self.cameras.items()}
        from datafarm.policy.spec import downscale

        frames = self.pair.rig.capture(list(self.config.cameras))
        return {observation_key(name): downscale(frames[name].rgb, (cam.height, cam.width))
                for name, cam in self.config.cameras.items()}


__all__ = ["DatafarmPiper", "observation_key"]
