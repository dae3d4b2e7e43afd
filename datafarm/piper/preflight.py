"""Before a recording on the dual PiPER: the cameras.yaml, then each camera and each arm as they really are.

`load_camera_configs` reads a cameras.yaml (one entry per farm camera: lerobot's camera config fields, see
``configs/cameras.example.yaml``) into lerobot camera configs. `preflight` runs on a connected
``datafarm_piper`` robot and checks:

* each camera delivers frames of the size cameras.yaml asks for, at (nearly) its frame rate: real
  cameras are read for ``measure_s`` through lerobot's own camera objects; simulated ones are the rig's
  cameras, whose rendered size and control rate must equal the yaml's (the rig does not upscale);
* each arm's CAN feedback arrives at least at ``min_feedback_hz`` (nominal 200 Hz), as piper_sdk counts it
  (the median over ``measure_s``).

Every problem is collected; `PreflightFailed` names each with its fix, before anything is written.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from datafarm.cameras import CAMERAS
from datafarm.errors import BadInput, Unavailable
from datafarm.sim.spaces import SIDES

if TYPE_CHECKING:
    from lerobot.cameras import CameraConfig

    from lerobot_robot_datafarm_piper import DatafarmPiper

log = logging.getLogger(__name__)

NOMINAL_FEEDBACK_HZ = 200.0


class PreflightFailed(Unavailable):
    """A camera or an arm is not as the recording needs it; the message names each problem and its fix."""


@dataclass(frozen=True)
class PreflightSettings:
    measure_s: float = 1.0  # how long each camera's frame rate and the arms' feedback rate are measured
    min_fps_ratio: float = 0.9  # a camera must deliver at least this fraction of its configured fps
    min_feedback_hz: float = 150.0  # each arm's slowest feedback stream (nominal 200 Hz; the watchdog stops < 100)


@dataclass
class PreflightReport:
    """What was measured: per camera (height, width, fps) and per arm its feedback rate (None: simulated)."""

    cameras: dict[str, dict[str, float]] = field(default_factory=dict)
    arms: dict[str, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"cameras": self.cameras, "arms_feedback_hz": self.arms}


def load_camera_configs(path: str | Path) -> dict[str, CameraConfig]:
    """cameras.yaml -> lerobot camera configs for head, left_wrist, right_wrist (all three, one fps).

    Each entry: ``type`` (opencv, intelrealsense) and that type's lerobot fields (``index_or_path`` or
    ``serial_number_or_name``, ``width``, ``height``, ``fps``, ...)."""
    from lerobot.cameras import CameraConfig
    from lerobot.cameras.opencv import OpenCVCameraConfig  # noqa: F401  registers "opencv"
    from lerobot.cameras.realsense import RealSenseCameraConfig  # noqa: F401  registers "intelrealsense"

    path = Path(path)
    if not path.is_file():
        raise BadInput(f"cameras file {path} not found: copy configs/cameras.example.yaml and set each camera's "
                       "device, width, height and fps")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise BadInput(f"{path} is not valid YAML ({error}); compare it with configs/cameras.example.yaml") from error
    if not isinstance(data, dict) or sorted(data) != sorted(CAMERAS):
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise BadInput(f"{path} must name exactly the cameras {list(CAMERAS)} (found {found}); the calibration "
                       "episode needs the head and both wrist cameras")
    configs: dict[str, CameraConfig] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or "type" not in entry:
            raise BadInput(f"{path}: camera {name!r} needs a mapping with a type (opencv or intelrealsense), e.g. "
                           "{type: opencv, index_or_path: /dev/video0, width: 640, height: 480, fps: 30}")
        fields = dict(entry)
        kind = fields.pop("type")
        try:
            config_class = CameraConfig.get_choice_class(kind)
        except KeyError as error:
            raise BadInput(f"{path}: camera {name!r} has type {kind!r}; use one of "
                           f"{sorted(CameraConfig.get_known_choices())}") from error
        missing = [key for key in ("width", "height", "fps") if not isinstance(fields.get(key), int)]
        if missing:
            raise BadInput(f"{path}: camera {name!r} needs whole numbers for {missing}: the preflight checks the "
                           "camera delivers exactly that size and rate")
        try:
            configs[name] = config_class(**fields)
        except (TypeError, ValueError) as error:
            raise BadInput(f"{path}: camera {name!r} ({kind}): {error}; see configs/cameras.example.yaml") from error
    rates = {name: config.fps for name, config in configs.items()}
    if len(set(rates.values())) != 1:
        raise BadInput(f"{path}: the cameras have different frame rates {rates}; a recording has one rate: set "
                       "the same fps for all three")
    return configs


def preflight(robot: DatafarmPiper, cameras: dict[str, CameraConfig],
              settings: PreflightSettings | None = None) -> PreflightReport:
    """Check a connected robot's cameras against `cameras` and its arms' feedback rates; raise
    `PreflightFailed` listing every problem, else return what was measured."""
    settings = settings or PreflightSettings()
    report = PreflightReport()
    if robot.config.simulated:
        _check_simulated_cameras(robot, cameras, report)
    else:
        _check_real_cameras(robot, cameras, settings, report)
        _check_feedback_rates(robot, settings, report)
    if report.problems:
        raise PreflightFailed("preflight failed, nothing was recorded: " + "; ".join(report.problems))
    log.info("preflight passed: cameras %s, arms' feedback %s", report.cameras, report.arms)
    return report


def _check_simulated_cameras(robot: DatafarmPiper, cameras: dict[str, CameraConfig], report: PreflightReport) -> None:
    rig = robot.pair.rig
    rate = rig.config.timing.control_hz
    frames = rig.capture(list(cameras))
    for name, config in cameras.items():
        height, width = frames[name].rgb.shape[:2]
        report.cameras[name] = {"height": height, "width": width, "fps": float(rate)}
        if (height, width) != (config.height, config.width):
            report.problems.append(
                f"camera {name!r} delivers {width}x{height}, cameras.yaml asks {config.width}x{config.height}: set "
                f"width {width}, height {height} in cameras.yaml (or the rig's camera size in configs/rig)")
        if config.fps != rate:
            report.problems.append(f"camera {name!r}: the simulated rig runs at {rate} Hz, cameras.yaml asks "
                                   f"{config.fps} fps: set fps {rate} in cameras.yaml")
    for side in SIDES:
        report.arms[side] = None  # simulated arms have no feedback stream


def _check_real_cameras(robot: DatafarmPiper, cameras: dict[str, CameraConfig], settings: PreflightSettings,
                        report: PreflightReport) -> None:
    for name, config in cameras.items():
        camera = robot.cameras[name]
        shapes, started = set(), time.perf_counter()
        count = 0
        try:
            while time.perf_counter() - started < settings.measure_s:
                shapes.add(camera.async_read(timeout_ms=1000).shape)  # waits for a new frame each call
                count += 1
        except (RuntimeError, TimeoutError) as error:
            report.problems.append(f"camera {name!r} ({camera}) stopped delivering frames ({error}): check its cable "
                                   "and that no other program holds it (`lerobot-find-cameras`)")
            continue
        fps = count / (time.perf_counter() - started)
        height, width = next(iter(shapes))[:2]
        report.cameras[name] = {"height": height, "width": width, "fps": round(fps, 1)}
        if shapes != {(config.height, config.width, 3)}:
            report.problems.append(f"camera {name!r} delivers frames of {sorted(shapes)}, cameras.yaml asks "
                                   f"{config.width}x{config.height}: set a size the camera supports "
                                   f"(`lerobot-find-cameras` lists them)")
        if fps < settings.min_fps_ratio * config.fps:
            report.problems.append(f"camera {name!r} delivers {fps:.1f} fps, cameras.yaml asks {config.fps}: lower the "
                                   "fps or the size, use a USB 3 port, or give the camera its own USB controller")


def _check_feedback_rates(robot: DatafarmPiper, settings: PreflightSettings, report: PreflightReport) -> None:
    arms = robot.pair.arms  # a PiperPair: its PiperArm per side
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    started = time.perf_counter()
    while time.perf_counter() - started < settings.measure_s:
        for side in SIDES:
            rates[side].append(arms[side].read().rate_hz)
        time.sleep(0.05)
    for side in SIDES:
        rate = float(np.median(rates[side]))  # the SDK counts in 0.1 s windows: one window is noisy
        report.arms[side] = round(rate, 1)
        if rate < settings.min_feedback_hz:
            report.problems.append(
                f"the {side} arm ({arms[side].can_name}) sends feedback at {rate:.0f} Hz (needs "
                f"{settings.min_feedback_hz:.0f} of the nominal {NOMINAL_FEEDBACK_HZ:.0f}): check its CAN cable and "
                "termination, run the port at 1 Mbit/s, and give each arm its own USB-CAN adapter")


__all__ = ["PreflightFailed", "PreflightReport", "PreflightSettings", "load_camera_configs", "preflight"]
