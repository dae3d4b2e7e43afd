"""The real dual-PiPER driver: piper_sdk's own ``C_PiperInterface_V2``, one per CAN name, behind a watchdog.

:class:`PiperArm` is one arm (state and commands in rad / m, converted to the SDK's 0.001 deg and
0.001 mm); :class:`PiperPair` is the two arms as an :class:`~datafarm.piper.arm_pair.ArmPair`: every
command passes :class:`~datafarm.piper.safety.SafetyLayer`, and a watchdog (inside ``observe`` / ``act``
and in a background thread) stops both arms when

* an arm's feedback is older than ``max_feedback_age_s`` (50 ms), or its stream is gone;
* an arm's feedback arrives slower than ``min_feedback_hz`` (frames are being lost);
* an arm reports a non-normal status (emergency stop, collision, ...), a non-zero error code, or a
  motor's collision / driver-error bit;
* a running control loop misses its deadline (no ``act`` for ``deadline_s``).

Stopping = hold (each arm is sent its measured pose, or its last command when the feedback is stale),
then the SDK's ``EmergencyStop(0x01)``; the stop latches and raises :class:`datafarm.errors.SafetyStop`.
Nothing resumes on its own: the SDK's resume (``0x02``) cuts motor power and the arms fall, so
:meth:`PiperPair.resume_after_estop` requires ``operator_confirmed=True``.

``dry_run=True``: the arms are opened and read, the safety layer and watchdog run, every command is
logged and kept in :attr:`PiperPair.commands` (the policy's targets in :attr:`PiperPair.targets`), and no
frame is sent (not even enable or emergency stop); :meth:`PiperPair.plot_commands` draws both as a PNG.

Versions: piper_sdk 0.6.x with python-can >= 4.4, < 5 (the SDK passes ``bustype``, removed in 5).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from datafarm.errors import SafetyStop, Unavailable
from datafarm.piper.arm_pair import ArmPair, PairObservation
from datafarm.piper.safety import SafeCommand, SafetyConfig, SafetyLayer
from datafarm.sim.spaces import JOINTS_PER_ARM, SIDES, arm_slice

log = logging.getLogger(__name__)

CTRL_CAN, MOVE_J, POSITION_VELOCITY = 0x01, 0x01, 0x00
GRIPPER_ENABLE = 0x01
ESTOP, ESTOP_RESUME = 0x01, 0x02


class WatchdogConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_feedback_age_s: float = Field(0.05, gt=0, description="older joint/gripper feedback stops both arms")
    min_feedback_hz: float = Field(100.0, ge=0, description="each feedback stream's least rate (nominal 200 Hz)")
    deadline_s: float = Field(0.1, gt=0, description="longest gap between two commands once a control loop runs")
    check_hz: float = Field(100.0, ge=0, description="background checks per second; 0: only inside observe/act")


class PiperPairConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    left_can: str = "can0"
    right_can: str = "can1"
    bustype: Literal["socketcan", "virtual"] = Field("socketcan", description="virtual: tests and the fake firmware")
    check_can_port: bool = Field(True, description="socketcan: the SDK checks the port is up at 1 Mbit/s")
    speed_pct: int = Field(20, ge=1, le=100, description="the firmware's speed percentage (MotionCtrl_2)")
    gripper_effort_mNm: int = Field(1000, ge=0, le=5000, description="gripper torque, 0.001 N m")
    connect_timeout_s: float = Field(2.0, gt=0)
    dry_run: bool = Field(False, description="run everything, log the commands, send nothing")
    watchdog: WatchdogConfig = WatchdogConfig()
    safety: SafetyConfig = SafetyConfig()

    def can_name(self, side: str) -> str:
        return self.left_can if side == "left" else self.right_can


def open_sdk(can_name: str, bustype: str = "socketcan", check_port: bool = True, send_frames: bool = True):
    """piper_sdk's interface for `can_name`, connected; one per name for the process (the SDK's singleton).

    The constructor's own bus set-up hard-codes socketcan, so the bus is made by ``CreateCanBus`` (the
    SDK's documented path for other bus types). On a virtual channel the receive bus also sends, as the
    SDK does on Windows and macOS: its second, send-only bus would queue every frame unread.
    """
    from piper_sdk import C_PiperInterface_V2

    sdk = C_PiperInterface_V2(can_name, judge_flag=False, can_auto_init=False)
    if not sdk.get_connect_status():
        try:
            sdk.CreateCanBus(can_name, bustype=bustype, judge_flag=check_port and bustype == "socketcan")
        except ConnectionError as error:
            raise Unavailable(f"cannot open CAN port {can_name!r} ({bustype}): {error}; bring it up first "
                              f"(`sudo ip link set {can_name} up type can bitrate 1000000`)") from error
        wrapper = sdk.GetCanBus()
        if wrapper.recv_bus is None:
            raise Unavailable(f"CAN port {can_name!r} ({bustype}) did not open: check the adapter and its name")
        if bustype == "virtual" and wrapper.send_bus is not wrapper.recv_bus:
            wrapper.send_bus.shutdown()
            wrapper.send_bus = wrapper.recv_bus
        # piper_init sends the SDK's parameter queries: frames, so not in a dry run
        sdk.ConnectPort(can_init=False, piper_init=send_frames, start_thread=True)
    return sdk


@dataclass(frozen=True)
class ArmReading:
    """One arm's feedback as the SDK holds it, in rad / m, with the checks' inputs."""

    position: np.ndarray  # (7,)
    stamp: float  # time.time() of the older of the joint and gripper feedback
    rate_hz: float  # the slowest feedback stream, as the SDK counts it
    arm_status: int
    err_code: int
    motor_faults: tuple[str, ...]


class PiperArm:
    """One PiPER on one CAN name. ``connect`` opens it; nothing is sent before ``enable``."""

    def __init__(self, can_name: str, config: PiperPairConfig | None = None):
        self.can_name = can_name
        self.config = config or PiperPairConfig()
        self.sdk = None
        self.last_command: np.ndarray | None = None
        self.suppressed_frames = 0  # dry run: frames that would have been sent

    @property
    def dry_run(self) -> bool:
        return self.config.dry_run

    def connect(self) -> None:
        self.sdk = open_sdk(self.can_name, self.config.bustype, self.config.check_can_port,
                            send_frames=not self.dry_run)
        deadline = time.monotonic() + self.config.connect_timeout_s
        while True:
            reading = self.read()
            age = time.time() - reading.stamp
            if age <= self.config.watchdog.max_feedback_age_s and reading.rate_hz >= self.config.watchdog.min_feedback_hz:
                return
            if time.monotonic() > deadline:
                raise Unavailable(
                    f"the PiPER on {self.can_name} gives no steady feedback (last {age:.1f} s ago, "
                    f"{reading.rate_hz:.0f} Hz): check its power, the CAN wiring and the adapter's name and bitrate")
            time.sleep(0.02)

    def read(self) -> ArmReading:
        joints = self.sdk.GetArmJointMsgs()
        gripper = self.sdk.GetArmGripperMsgs()
        status = self.sdk.GetArmStatus()
        state = joints.joint_state
        mdeg = (state.joint_1, state.joint_2, state.joint_3, state.joint_4, state.joint_5, state.joint_6)
        position = np.array([math.radians(v / 1000) for v in mdeg] + [gripper.gripper_state.grippers_angle / 1e6])
        faults = []
        motors = self.sdk.GetArmLowSpdInfoMsgs()
        for i in range(1, JOINTS_PER_ARM + 1):
            foc = getattr(motors, f"motor_{i}").foc_status
            if foc.collision_status:
                faults.append(f"joint {i} collision protection")
            if foc.driver_error_status:
                faults.append(f"joint {i} driver error")
        return ArmReading(position=position, stamp=min(joints.time_stamp, gripper.time_stamp),
                          rate_hz=min(joints.Hz, gripper.Hz, status.Hz), arm_status=int(status.arm_status.arm_status),
                          err_code=int(status.arm_status.err_code), motor_faults=tuple(faults))

    def enable(self) -> None:
        """Enable the motors and the gripper, CAN control in MOVE J at the configured speed; wait for it."""
        measured = self.read().position
        self._send("enable", lambda: (
            self.sdk.EnableArm(7),
            self.sdk.GripperCtrl(round(measured[-1] * 1e6), self.config.gripper_effort_mNm, GRIPPER_ENABLE, 0),
            self.sdk.MotionCtrl_2(CTRL_CAN, MOVE_J, self.config.speed_pct, POSITION_VELOCITY)), frames=3)
        if self.dry_run:
            return
        deadline = time.monotonic() + self.config.connect_timeout_s
        while not all(self.sdk.GetArmEnableStatus()):
            if time.monotonic() > deadline:
                raise Unavailable(f"the PiPER on {self.can_name} did not enable its motors within "
                                  f"{self.config.connect_timeout_s} s: release its emergency-stop button, check power")
            self.sdk.EnableArm(7)
            time.sleep(0.05)

    def send(self, command: np.ndarray) -> None:
        """Joint targets (6, rad) and gripper opening (m) in the SDK's units: 0.001 deg and 0.001 mm."""
        command = np.asarray(command, dtype=float)
        mdeg = [round(math.degrees(q) * 1000) for q in command[:JOINTS_PER_ARM]]
        opening_um = round(float(command[-1]) * 1e6)
        self._send(f"joints {mdeg} mdeg, gripper {opening_um} um", lambda: (
            self.sdk.MotionCtrl_2(CTRL_CAN, MOVE_J, self.config.speed_pct, POSITION_VELOCITY),
            self.sdk.JointCtrl(*mdeg),
            self.sdk.GripperCtrl(opening_um, self.config.gripper_effort_mNm, GRIPPER_ENABLE, 0)), frames=5)
        self.last_command = command.copy()

    def emergency_stop(self) -> None:
        self._send("EMERGENCY STOP", lambda: self.sdk.EmergencyStop(ESTOP), frames=1, level=logging.WARNING)

    def release_emergency_stop(self) -> None:
        """The SDK's resume: clears the stop AND cuts motor power (the arm falls). Only PiperPair calls it."""
        self._send("resume after emergency stop (motor power cut)", lambda: self.sdk.EmergencyStop(ESTOP_RESUME),
                   frames=1, level=logging.WARNING)

    def disconnect(self) -> None:
        if self.sdk is not None:
            self.sdk.DisconnectPort()
            self.sdk = None

    def _send(self, what: str, send, frames: int, level: int = logging.DEBUG) -> None:
        if self.dry_run:
            self.suppressed_frames += frames
            log.log(level, "dry run, %s would get: %s", self.can_name, what)
            return
        log.log(level, "%s: %s", self.can_name, what)
        send()


class PiperPair(ArmPair):
    """Both PiPERs (left first, 14-D), through the safety layer and the watchdog."""

    def __init__(self, config: PiperPairConfig | None = None, safety: SafetyLayer | None = None):
        self.config = config or PiperPairConfig()
        self.arms = {side: PiperArm(self.config.can_name(side), self.config) for side in SIDES}
        self.safety = safety
        self.commands: deque[tuple[float, np.ndarray]] = deque(maxlen=100_000)  # (time, sent 14-D command)
        self.targets: deque[tuple[float, np.ndarray]] = deque(maxlen=100_000)  # (time, the policy's 14-D target)
        self._lock = threading.RLock()  # the SDK's senders are not thread-safe; the watchdog sends too
        self._estop_reason: str | None = None
        self._last_act: float | None = None  # monotonic time of the last command: the loop's deadline
        self._watch_stop = threading.Event()
        self._watch_thread: threading.Thread | None = None
        self._connected = False

    # -- ArmPair --------------------------------------------------------------------------------------
    def connect(self) -> None:
        if self.safety is None:
            self.safety = SafetyLayer(self.config.safety)
        for arm in self.arms.values():
            arm.connect()
        for arm in self.arms.values():
            arm.enable()
        self._connected = True
        self.safety.reset(self._read_checked().position)
        self._start_watchdog()
        log.info("PiPER pair connected (%s, %s)%s", self.config.left_can, self.config.right_can,
                 " in dry run: nothing is sent" if self.config.dry_run else "")

    def observe(self) -> PairObservation:
        with self._lock:
            self._raise_if_stopped()
            return self._read_checked()

    def act(self, target: np.ndarray) -> SafeCommand:
        with self._lock:
            self._raise_if_stopped()
            now = time.monotonic()
            if self._last_act is not None and now - self._last_act > self.config.watchdog.deadline_s:
                self._trip(f"the control loop missed its deadline: {1000 * (now - self._last_act):.0f} ms "
                           f"between commands (limit {1000 * self.config.watchdog.deadline_s:.0f} ms)")
            observation = self._read_checked()
            self.targets.append((time.time(), np.array(target, dtype=float).reshape(-1)))
            try:
                safe = self.safety.filter(target, observation.position)
            except SafetyStop as stop:
                self._trip(str(stop))
            for side, arm in self.arms.items():
                arm.send(safe.command[arm_slice(side)])
            self.commands.append((time.time(), safe.command.copy()))
            self._last_act = time.monotonic()
            return safe

    def stop(self) -> None:
        with self._lock:
            self._last_act = None
            if self._estop_reason is None and self._connected:
                self._hold()

    def emergency_stop(self, reason: str) -> None:
        with self._lock:
            if self._estop_reason is not None:
                return
            log.error("stopping both arms: %s", reason)
            self._last_act = None
            self._hold()
            for arm in self.arms.values():
                arm.emergency_stop()
            self._estop_reason = reason

    def resume_after_estop(self, operator_confirmed: bool = False) -> None:
        with self._lock:
            if self._estop_reason is None:
                return
            if not operator_confirmed:
                raise SafetyStop(
                    f"the arms stay stopped ({self._estop_reason}): the SDK's resume cuts motor power and the arms "
                    "fall; support both arms, then call resume_after_estop(operator_confirmed=True)")
            log.warning("operator confirmed: releasing the emergency stop (%s)", self._estop_reason)
            for arm in self.arms.values():
                arm.release_emergency_stop()
            time.sleep(0.05)  # let the firmware take the reset before the enable
            for arm in self.arms.values():
                arm.enable()
            self._estop_reason = None
            self.safety.reset(self._read_checked().position)

    def disconnect(self) -> None:
        self._watch_stop.set()
        if self._watch_thread is not None:
            self._watch_thread.join(timeout=2.0)
            self._watch_thread = None
        with self._lock:
            self._connected = False
            for arm in self.arms.values():
                arm.disconnect()

    @property
    def estopped(self) -> str | None:
        return self._estop_reason

    @property
    def deadline_s(self) -> float:
        return self.config.watchdog.deadline_s

    def plot_commands(self, path: Path | str) -> Path:
        """The dry run's plot: each axis's policy target vs the safety layer's command over time, as a PNG."""
        from datafarm.piper.command_plot import plot_commands

        return plot_commands(list(self.targets), list(self.commands), path)

    # -- the watchdog -----------------------------------------------------------------------------------
    def problems(self, readings: dict[str, ArmReading] | None = None) -> list[str]:
        """What the watchdog would stop for now (empty when all is well)."""
        readings = readings or {side: arm.read() for side, arm in self.arms.items()}
        watchdog, now, found = self.config.watchdog, time.time(), []
        for side, reading in readings.items():
            name = f"the {side} arm ({self.arms[side].can_name})"
            age = now - reading.stamp
            if age > watchdog.max_feedback_age_s:
                found.append(f"{name}'s feedback is {1000 * age:.0f} ms old (limit "
                             f"{1000 * watchdog.max_feedback_age_s:.0f} ms): its CAN stream is lost")
            elif reading.rate_hz < watchdog.min_feedback_hz:
                found.append(f"{name}'s feedback comes at {reading.rate_hz:.0f} Hz (needs {watchdog.min_feedback_hz:.0f}"
                             " of the nominal 200): CAN frames are being lost")
            if reading.arm_status != 0:
                found.append(f"{name} reports arm status 0x{reading.arm_status:02X} ({_status_name(reading.arm_status)})")
            if reading.err_code != 0:
                found.append(f"{name} reports error code 0x{reading.err_code:04X} "
                             "(bits 0-5: joint communication, 8-13: joint angle limit)")
            found.extend(f"{name} reports {fault}" for fault in reading.motor_faults)
        if self._last_act is not None and time.monotonic() - self._last_act > watchdog.deadline_s:
            found.append(f"the control loop missed its deadline: no command for "
                         f"{1000 * (time.monotonic() - self._last_act):.0f} ms (limit {1000 * watchdog.deadline_s:.0f} ms)")
        return found

    def _read_checked(self) -> PairObservation:
        readings = {side: arm.read() for side, arm in self.arms.items()}
        found = self.problems(readings)
        if found:
            self._trip("; ".join(found))
        position = np.concatenate([readings[side].position for side in SIDES])
        return PairObservation(position=position, stamp=min(r.stamp for r in readings.values()))

    def _hold(self) -> None:
        """Each arm: its measured pose if the feedback is fresh, else its last command (no jump back to old data)."""
        for arm in self.arms.values():
            reading = arm.read()
            if time.time() - reading.stamp <= self.config.watchdog.max_feedback_age_s:
                arm.send(reading.position)
            elif arm.last_command is not None:
                arm.send(arm.last_command)

    def _start_watchdog(self) -> None:
        if self.config.watchdog.check_hz <= 0 or self._watch_thread is not None:
            return
        self._watch_stop.clear()
        self._watch_thread = threading.Thread(target=self._watch, name="piper-watchdog", daemon=True)
        self._watch_thread.start()

    def _watch(self) -> None:
        period = 1.0 / self.config.watchdog.check_hz
        while not self._watch_stop.wait(period):
            with self._lock:
                if not self._connected or self._estop_reason is not None:
                    continue
                found = self.problems()
                if found:
                    self.emergency_stop("; ".join(found))


def _status_name(code: int) -> str:
    from piper_sdk.piper_msgs.msg_v2.feedback.arm_feedback_status import (
        ArmMsgFeedbackStatusEnum,
    )

    return ArmMsgFeedbackStatusEnum.ArmStatus.match_value(code).name.lower().replace("_", " ")


__all__ = ["ArmReading", "PiperArm", "PiperPair", "PiperPairConfig", "WatchdogConfig", "open_sdk"]
