"""Record THE calibration episode on the dual PiPER (or its simulation): `datafarm record-calibration`.

The robot is lerobot's ``datafarm_piper`` (built by name through lerobot's plugin registration and
``make_robot_from_config``), so real cameras come through lerobot's camera classes and simulated ones
from the SAPIEN rig. After `datafarm.piper.preflight` passes, ``seconds x fps`` frames of the three
cameras and the 14-D state are written as a one-episode LeRobot v3.0 dataset by lerobot's own writer,
with the farm's feature names (`datafarm.dataset.harvest.dataset_features`) and the calibration task
string, plus ``datafarm_calibration.json`` (provenance: real or simulated, the cameras, the preflight's
measurements, the loop's timing). `datafarm prepare` accepts the result unchanged.

The arms: by default they are enabled and held at the pose measured at the start (the hold goes
through the safety layer each tick; in simulation they hold the rig's rest pose). With ``teach=True``
(real arms) the robot runs in dry run: nothing is sent to the arms, not even enable, so an operator can
move them in the PiPER's teach mode; the action column is then the measured state.

The dataset is written under ``<output>.partial`` and renamed to ``output`` only when complete.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from datafarm.calibration.episode import PROVENANCE_FILE
from datafarm.calibration.synth import CALIBRATION_TASK_STRING
from datafarm.cameras import CAMERA_KEYS
from datafarm.errors import BadInput, Unavailable
from datafarm.piper.preflight import (
    PreflightFailed,
    PreflightReport,
    PreflightSettings,
    load_camera_configs,
    preflight,
)
from datafarm.sim.spaces import AXIS_NAMES

if TYPE_CHECKING:
    from lerobot.cameras import CameraConfig

    from lerobot_robot_datafarm_piper import DatafarmPiper

log = logging.getLogger(__name__)

RECORD_SOURCE = "datafarm record-calibration"
REPO_ID = "datafarm/calibration"
SIMULATED_DEADLINE_S = 5.0  # the simulated rig's clock is its own: a slow CPU render is not a stalled loop
# Real arms: the command is one constant hold pose, so a late tick cannot move them anywhere new; the
# writer's first frame (starting lerobot's encoders) can take longer than the 0.1 s a policy loop gets.
REAL_DEADLINE_S = 1.0


@dataclass(frozen=True)
class CalibrationRecordingConfig:
    """Where the arms and cameras are and how long to record."""

    cameras_file: Path
    left_can: str = "can0"
    right_can: str = "can1"
    seconds: float = 10.0
    simulated: bool = False
    teach: bool = False  # real arms: send nothing (teach mode), record what the operator does
    bustype: str = "socketcan"  # "virtual": python-can's in-process bus (the fake firmware)
    rig: str = "dual_piper"  # simulated: the rig config
    calibration_dir: Path | None = None  # lerobot's per-robot calibration folder (default: lerobot's cache)
    preflight: PreflightSettings = field(default_factory=PreflightSettings)


@dataclass(frozen=True)
class RecordedCalibration:
    """What was written: the dataset root, its frame count and rate, and what the preflight measured."""

    root: Path
    frames: int
    fps: int
    preflight: PreflightReport
    late_ticks: int  # real arms: ticks that started more than half a period late


def make_robot(config: CalibrationRecordingConfig, cameras: dict[str, CameraConfig]) -> DatafarmPiper:
    """The ``datafarm_piper`` robot exactly as lerobot's tools build it: registered plugins, config by name."""
    from lerobot.robots.config import RobotConfig
    from lerobot.robots.utils import make_robot_from_config
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()
    config_class = RobotConfig.get_choice_class("datafarm_piper")
    robot_config = config_class(left_can=config.left_can, right_can=config.right_can, bustype=config.bustype,
                                cameras=cameras, simulated=config.simulated, rig=config.rig,
                                dry_run=config.teach and not config.simulated,
                                deadline_s=SIMULATED_DEADLINE_S if config.simulated else REAL_DEADLINE_S,
                                calibration_dir=config.calibration_dir)
    try:
        return make_robot_from_config(robot_config)
    except (ImportError, ValueError) as error:  # lerobot wraps its camera classes' ImportError in a ValueError
        missing = error if isinstance(error, ImportError) else error.__cause__
        if not isinstance(missing, ImportError):
            raise
        raise Unavailable(f"a camera in {config.cameras_file} cannot be used here: {missing}") from error


def record_calibration(output: str | Path, config: CalibrationRecordingConfig,
                       progress: Callable[[int, int], None] | None = None) -> RecordedCalibration:
    """Preflight, then record the calibration episode into a new LeRobot dataset at `output`.

    Raises BadInput (output exists, bad cameras.yaml, bad duration), PreflightFailed (a camera or an arm
    is not as needed; nothing is written), Unavailable (an arm cannot be opened) or SafetyStop."""
    output = Path(output)
    if output.exists():
        raise BadInput(f"{output} already exists; remove it or choose another --output folder")
    if not config.seconds > 0:
        raise BadInput(f"--seconds must be positive, got {config.seconds}")
    if config.teach and config.simulated:
        raise BadInput("--teach is for real arms (the operator moves them); leave it out with --simulated")
    cameras = load_camera_configs(config.cameras_file)
    fps = int(next(iter(cameras.values())).fps)
    robot = make_robot(config, cameras)
    _connect(robot)
    try:
        report = preflight(robot, cameras, config.preflight)
        frames = max(2, round(config.seconds * fps))
        late = _record(robot, cameras, output, fps, frames, config, progress)
        provenance = {
            "synthetic": config.simulated, "source": RECORD_SOURCE, "simulated": config.simulated,
            "arms": "teach mode (nothing sent)" if config.teach else "held at the starting pose",
            "left_can": config.left_can, "right_can": config.right_can, "seconds": frames / fps, "fps": fps,
            "camera_settings": {name: _camera_summary(camera) for name, camera in cameras.items()},
            "preflight": report.as_dict(), "late_ticks": late,
            **({"note": "recorded in the simulated rig; not real footage"} if config.simulated else {}),
        }
        (output.with_name(output.name + ".partial") / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2))
        output.with_name(output.name + ".partial").rename(output)
    finally:
        robot.disconnect()
    log.info("calibration episode written to %s: %d frames at %d fps (%s)", output, frames, fps,
             "simulated" if config.simulated else f"CAN {config.left_can}, {config.right_can}")
    return RecordedCalibration(output, frames, fps, report, late)


def _connect(robot: DatafarmPiper) -> None:
    """Connect; a camera lerobot cannot open or configure is a preflight failure naming the fix."""
    try:
        robot.connect()
    except (ConnectionError, RuntimeError, TimeoutError, OSError) as error:
        raise PreflightFailed(f"preflight failed, nothing was recorded: a camera could not be opened as cameras.yaml "
                              f"asks ({error}); check its device path or serial number and a size and fps it "
                              "supports (`lerobot-find-cameras opencv` / `realsense` lists them)") from error


def _camera_summary(camera: CameraConfig) -> dict[str, Any]:
    return {"type": camera.type, "width": camera.width, "height": camera.height, "fps": camera.fps}


def _record(robot: DatafarmPiper, cameras: dict[str, CameraConfig], output: Path, fps: int, frames: int,
            config: CalibrationRecordingConfig, progress: Callable[[int, int], None] | None) -> int:
    """Write `frames` ticks into ``<output>.partial`` with lerobot's writer; returns the late ticks."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.utils.robot_utils import precise_sleep

    from datafarm.dataset.harvest import (  # here: datafarm.dataset imports this package
        FASTEST_SETTINGS,
        ROBOT_TYPE,
        HarvestItem,
        _check_no_dropped_frames,
        dataset_features,
    )
    from datafarm.logs import ffmpeg_kept_quiet, silence_progress_bars
    from lerobot_robot_datafarm_piper.datafarm_piper import observation_key

    staging = output.with_name(output.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    silence_progress_bars()
    settings = FASTEST_SETTINGS
    resolutions = {name: (int(camera.height), int(camera.width)) for name, camera in cameras.items()}
    period, late = 1.0 / fps, 0
    with ffmpeg_kept_quiet():
        dataset = LeRobotDataset.create(
            repo_id=REPO_ID, fps=fps, features=dataset_features(resolutions), root=staging, robot_type=ROBOT_TYPE,
            use_videos=True, rgb_encoder=settings.rgb_encoder(), encoder_threads=settings.encoder_threads,
            streaming_encoding=True, encoder_queue_maxsize=frames + 1)  # never drops: sized to the episode
        try:
            hold: dict[str, float] | None = None
            next_tick = time.perf_counter()
            for index in range(frames):
                observation = robot.get_observation()
                state = np.array([observation[name] for name in AXIS_NAMES], dtype=np.float32)
                if config.teach:
                    action = state
                else:
                    hold = hold or {name: observation[name] for name in AXIS_NAMES}
                    sent = robot.send_action(hold)  # through the safety layer; steps the simulated rig
                    action = np.array([sent[name] for name in AXIS_NAMES], dtype=np.float32)
                frame: dict[str, Any] = {"observation.state": state, "action": action, "task": CALIBRATION_TASK_STRING}
                frame.update({CAMERA_KEYS[name]: observation[observation_key(name)] for name in cameras})
                dataset.add_frame(frame)
                if progress:
                    progress(index + 1, frames)
                if not config.simulated:  # real time; the simulated rig keeps its own clock
                    next_tick += period
                    delay = next_tick - time.perf_counter()
                    if delay < -period / 2:
                        late += 1
                        next_tick = time.perf_counter()  # do not burst to catch up
                    precise_sleep(max(0.0, delay))
            dataset.save_episode()
            _check_no_dropped_frames(dataset, HarvestItem(staging))
            dataset.finalize()
        except BaseException:
            try:
                dataset.clear_episode_buffer()
                dataset.finalize()  # stops lerobot's encoder threads before the staging folder goes
            except Exception:  # the first error is the one to report
                log.debug("finalize after a failed recording also failed", exc_info=True)
            shutil.rmtree(staging, ignore_errors=True)
            raise
    if late:
        log.warning("%d of %d ticks started more than half a period late (a busy host?)", late, frames)
    return late


__all__ = ["CalibrationRecordingConfig", "RecordedCalibration", "make_robot", "record_calibration"]
