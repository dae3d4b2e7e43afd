"""Where an evaluation trial runs: the real dual PiPER with its cameras, or the trial's simulated scene.

A station owns an :class:`~datafarm.piper.arm_pair.ArmPair` (the safety layer inside) and the cameras:

* :class:`RealStation`: lerobot's ``datafarm_piper`` robot (built by name, like lerobot's tools); its
  ``PiperPair`` and its lerobot cameras (farm names head, left_wrist, right_wrist).
* :class:`SimStation`: per trial, the eval seed's scene built with ``episode_world`` (datafarm.policy.trials.Trial),
  a :class:`~datafarm.piper.sim_pair.SimPair` on that rig whose step is the trial's ``TaskEnv.step`` (the
  trace the hidden judge reads), and the farm renderer's frames (what the policy was trained on).

``preflight`` checks the arms and moves them slowly (the safety layer's change cap) to the start pose,
the rig's rest pose.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from datafarm.errors import SafetyStop, Unavailable
from datafarm.piper.arm_pair import ArmPair
from datafarm.sim.config import load_rig_config

if TYPE_CHECKING:
    from datafarm.policy.trials import Trial, TrialJudge, TrialSetup

log = logging.getLogger(__name__)

START_TOLERANCE = 0.02  # rad / m: the arms count as at the start pose within this of every axis
MAX_FEEDBACK_AGE_S = 0.1  # real arms: an observation older than this at preflight is not fresh


@dataclass
class PreflightResult:
    feedback_age_s: float | None  # None in simulation (no feedback stream)
    start_error: float  # largest |measured - start| after the move
    ticks: int  # control ticks the slow move took

    def as_dict(self) -> dict[str, Any]:
        return {"feedback_age_s": self.feedback_age_s, "start_error": self.start_error, "ticks": self.ticks}


def move_to_start(pair: ArmPair, start: np.ndarray, rate_hz: float, timeout_s: float = 30.0,
                  real_time: bool = True) -> int:
    """Command `start` every tick (ramped by the safety layer's change cap) until every axis is within
    START_TOLERANCE; returns the ticks it took. Raises Unavailable when it does not get there."""
    period = 1.0 / rate_hz
    for tick in range(int(timeout_s * rate_hz)):
        error = float(np.max(np.abs(pair.observe().position - start)))
        if error < START_TOLERANCE:
            pair.stop()
            return tick
        pair.act(start)
        if real_time:
            time.sleep(period)
    pair.stop()
    raise Unavailable(f"the arms did not reach the start pose within {timeout_s:.0f} s (still {error:.3f} off): "
                      "check for an obstacle or a held joint, then rerun")


def check_and_home(pair: ArmPair, start: np.ndarray, rate_hz: float, real_time: bool) -> PreflightResult:
    """Feedback fresh, no latched stop or error (``observe`` raises SafetyStop on any), then the slow move."""
    if pair.estopped:
        raise SafetyStop(f"the arms are emergency-stopped ({pair.estopped}): fix the cause, support both arms and "
                         "resume them (resume_after_estop(operator_confirmed=True)) or power-cycle them, then rerun")
    observation = pair.observe()
    age = time.time() - observation.stamp if real_time else None
    if age is not None and age > MAX_FEEDBACK_AGE_S:
        raise Unavailable(f"the arms' feedback is {1000 * age:.0f} ms old at preflight (limit "
                          f"{1000 * MAX_FEEDBACK_AGE_S:.0f} ms): check both CAN adapters and cables, then rerun")
    ticks = move_to_start(pair, start, rate_hz, real_time=real_time)
    error = float(np.max(np.abs(pair.observe().position - start)))
    log.info("preflight passed: feedback age %s, start pose reached in %d ticks (%.4f off)",
             "n/a (simulated)" if age is None else f"{1000 * age:.1f} ms", ticks, error)
    return PreflightResult(age, error, ticks)


class Station(ABC):
    """The arms and cameras one evaluation drives, trial after trial."""

    simulated: bool
    rate_hz: int

    @property
    @abstractmethod
    def pair(self) -> ArmPair: ...

    @abstractmethod
    def preflight(self) -> PreflightResult: ...

    @abstractmethod
    def start_trial(self, seed: int, cameras: tuple[str, ...]) -> None:
        """Ready the arms for a trial on `seed` whose frames show `cameras`."""

    @abstractmethod
    def frames(self) -> dict[str, np.ndarray]:
        """This tick's camera frames (farm camera names -> HWC uint8)."""

    def end_trial(self) -> None:
        self.pair.stop()

    @abstractmethod
    def close(self) -> None: ...


def rest_pose() -> np.ndarray:
    rig = load_rig_config()
    arm = np.array([*rig.rest_qpos, rig.rest_gripper])
    return np.concatenate([arm, arm])


@dataclass
class RealStation(Station):
    """The real pair through lerobot's ``datafarm_piper`` robot; cameras from lerobot's camera classes."""

    robot: Any  # lerobot_robot_datafarm_piper.DatafarmPiper, connected
    rate_hz: int = 30
    simulated: bool = False
    _cameras: tuple[str, ...] = field(default=())

    @classmethod
    def connect(cls, left_can: str, right_can: str, cameras_file: Path | None, rate_hz: int = 30,
                bustype: str = "socketcan") -> RealStation:
        from lerobot.robots.config import RobotConfig
        from lerobot.robots.utils import make_robot_from_config
        from lerobot.utils.import_utils import register_third_party_plugins

        from datafarm.piper.preflight import load_camera_configs

        register_third_party_plugins()
        cameras = load_camera_configs(cameras_file) if cameras_file else {}
        config = RobotConfig.get_choice_class("datafarm_piper")(left_can=left_can, right_can=right_can,
                                                                bustype=bustype, cameras=cameras)
        robot = make_robot_from_config(config)
        robot.connect()
        return cls(robot, rate_hz)

    @property
    def pair(self) -> ArmPair:
        return self.robot.pair

    def preflight(self) -> PreflightResult:
        return check_and_home(self.pair, rest_pose(), self.rate_hz, real_time=True)

    def start_trial(self, seed: int, cameras: tuple[str, ...]) -> None:
        missing = sorted(set(cameras) - set(self.robot.cameras))
        if missing:
            raise Unavailable(f"the policy looks at cameras {missing} that --cameras does not configure: add them "
                              "to the cameras yaml (configs/cameras.example.yaml)")
        self._cameras = tuple(self.robot.cameras)  # every configured camera is recorded
        move_to_start(self.pair, rest_pose(), self.rate_hz)

    def frames(self) -> dict[str, np.ndarray]:
        return {name: self.robot.cameras[name].read_latest() for name in self._cameras}

    def close(self) -> None:
        if self.robot.is_connected:
            self.robot.disconnect()


class SimStation(Station):
    """Each trial in its seed's simulated scene; the arms through a SimPair stepping the trial's TaskEnv."""

    simulated = True

    def __init__(self, setup: TrialSetup, judge: TrialJudge, deadline_s: float = 30.0, owns_judge: bool = False):
        self.setup, self.judge, self.deadline_s, self.owns_judge = setup, judge, deadline_s, owns_judge
        self.rate_hz = setup.rig_config.timing.control_hz
        self.trial: Trial | None = None
        self._pair: ArmPair | None = None

    @property
    def pair(self) -> ArmPair:
        if self._pair is None:
            raise Unavailable("the simulated station has no arms yet: call start_trial() or preflight() first")
        return self._pair

    def _connect(self, rig, step=None) -> None:
        from datafarm.piper.sim_pair import SimPair, SimPairConfig

        # The deadline is wall clock: a CPU renderer and a CPU policy take far longer than a real tick.
        self._pair = SimPair(SimPairConfig(deadline_s=self.deadline_s), rig=rig, step=step)
        self._pair.connect()

    def preflight(self) -> PreflightResult:
        """The same checks and slow move on a rig of the workspace's calibration, started off the rest pose."""
        from datafarm.sim.rig import DualArmRig

        rig = DualArmRig.create(self.setup.rig_config.model_copy(update={"cameras": {}}))
        rig.reset(rig.rest_state() + 0.1)
        self._connect(rig)
        try:
            return check_and_home(self.pair, rig.rest_state(), self.rate_hz, real_time=False)
        finally:
            self._pair.disconnect()
            self._pair = None

    def start_trial(self, seed: int, cameras: tuple[str, ...]) -> None:
        """Build the seed's scene (the arms start where the farm's episodes start: the rest pose plus its noise)."""
        from datafarm.policy.trials import Trial

        self.trial = Trial(self.setup, seed, "original", self.judge, cameras=cameras)
        self._connect(self.trial.rig, step=self.trial.env.step)

    def frames(self) -> dict[str, np.ndarray]:
        if self.trial is None:
            raise Unavailable("no simulated trial is running: call start_trial() first")
        return self.trial.observe()

    def end_trial(self) -> None:
        if self._pair is not None:
            self._pair.stop()

    def close(self) -> None:
        if self._pair is not None:
            self._pair.disconnect()
        self._pair = self.trial = None
        if self.owns_judge:
            self.judge.close()


__all__ = ["PreflightResult", "RealStation", "SimStation", "Station", "check_and_home", "move_to_start", "rest_pose"]
