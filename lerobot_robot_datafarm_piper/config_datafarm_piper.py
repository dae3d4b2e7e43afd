"""The robot config lerobot parses for `--robot.type=datafarm_piper` (options are `--robot.<field>=...`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.cameras import CameraConfig
from lerobot.robots.config import RobotConfig

from datafarm.cameras import CAMERAS
from datafarm.errors import BadInput
from datafarm.piper.safety import SafetyConfig

BUS_TYPES = ("socketcan", "virtual")
_SAFETY = SafetyConfig()  # the layer's own defaults, so the two cannot drift apart


@dataclass
class PiperSafetySettings:
    """The safety layer's limits (datafarm.piper.safety.SafetyConfig), as lerobot's parser takes them."""

    max_step_rad: float = _SAFETY.max_step_rad  # largest joint change per tick (30 Hz: 0.6 rad/s)
    max_gripper_step_m: float = _SAFETY.max_gripper_step_m  # largest gripper change per tick
    stop_jump_rad: float = _SAFETY.stop_jump_rad  # a target this far from the measured joint stops both arms
    box_margin_m: float = _SAFETY.box_margin_m  # the workspace box extends this far beyond the table
    box_floor_m: float = _SAFETY.box_floor_m  # lowest TCP height above the table top
    box_ceiling_m: float = _SAFETY.box_ceiling_m  # highest TCP height above the table top
    stop_after_box_holds: int = _SAFETY.stop_after_box_holds  # holds in a row at the box's wall that stop

    def to_safety_config(self) -> SafetyConfig:
        return SafetyConfig(**vars(self))


@RobotConfig.register_subclass("datafarm_piper")
@dataclass
class DatafarmPiperConfig(RobotConfig):
    """Two AgileX PiPERs (left, right), or their SAPIEN simulation when `simulated` is true.

    cameras: lerobot camera configs named head, left_wrist, right_wrist (the farm's views; they appear in
    observations and datasets as cam_high, cam_left_wrist, cam_right_wrist). In simulated mode the rig's
    cameras are rendered instead and only each config's width and height are used.
    deadline_s: longest gap between two actions once a control loop runs (default: 0.1 s real, 0.5 s
    simulated). speed_pct: the firmware's speed percentage (real arms only).
    """

    left_can: str = "can0"
    right_can: str = "can1"
    bustype: str = "socketcan"  # "virtual": python-can's in-process bus (tests, the fake firmware)
    cameras: dict[str, CameraConfig] = field(default_factory=dict)
    simulated: bool = False
    rig: str = "dual_piper"  # simulated: the rig config to build
    dry_run: bool = False
    speed_pct: int = 20
    deadline_s: float | None = None
    safety: PiperSafetySettings = field(default_factory=PiperSafetySettings)

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = sorted(set(self.cameras) - set(CAMERAS))
        if unknown:
            raise BadInput(f"unknown camera names {unknown} for the datafarm_piper robot: name them "
                           f"{list(CAMERAS)} (the farm's views), e.g. --robot.cameras='{{head: {{type: opencv, "
                           "index_or_path: 0, width: 640, height: 480, fps: 30}}'")
        if self.bustype not in BUS_TYPES:
            raise BadInput(f"--robot.bustype={self.bustype!r} is not supported: use one of {list(BUS_TYPES)}")
        if not 1 <= self.speed_pct <= 100:
            raise BadInput(f"--robot.speed_pct={self.speed_pct} is out of range: give 1-100 (default 20)")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise BadInput(f"--robot.deadline_s={self.deadline_s} must be positive (seconds), or left unset")
        if self.left_can == self.right_can and not self.simulated:
            raise BadInput(f"both arms are on CAN port {self.left_can!r}: give each arm its own "
                           "(--robot.left_can=can0 --robot.right_can=can1)")
