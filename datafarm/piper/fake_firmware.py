"""A fake PiPER firmware on python-can's virtual bus, so piper_sdk's real code runs against it unchanged.

It speaks the SDK's own CAN protocol (piper_sdk 0.6.x, ``protocol/protocol_v2``; 11-bit ids, 8 bytes,
big-endian), at the SDK's units (joints in 0.001 deg, gripper opening in 0.001 mm):

* **feedback**, every tick of a ``feedback_hz`` (200 Hz) thread: 0x2A1 arm status (control mode, arm
  status incl. emergency stop and collision, move mode, motion status, the 16-bit error code),
  0x2A5-0x2A7 joint angles, 0x2A8 gripper; every ``driver_info_every``-th tick 0x261-0x266 per-motor
  driver status (the enable bit the SDK's ``GetArmEnableStatus`` reads, the collision and driver-error bits);
* **commands**: 0x471 enable / disable motors, 0x151 ``MotionCtrl_2`` (control mode, move mode, speed
  percentage), 0x155-0x157 ``JointCtrl`` targets, 0x159 ``GripperCtrl``, 0x150 ``MotionCtrl_1``'s
  emergency stop (0x01: the joints freeze where they are, every motion command is ignored, the status
  reports emergency stop) and its "resume" (0x02, the SDK's ``ResetPiper``: the firmware clears its
  errors and *cuts motor power*, so a real arm drops; counted in :attr:`FakePiperFirmware.drops`);
* **motion**: each enabled joint moves toward its target by a first-order lag (``time_constant_s``)
  capped at ``max_joint_speed_rad_s`` x the commanded speed percentage; joint targets only count in
  CAN control mode with MOVE J, clipped to the SDK's joint limits like the real firmware's;
* **the joint backend** (:class:`JointBackend`): by default the first-order model above; a backend given
  to the constructor (e.g. :class:`datafarm.piper.rig_firmware.RigArmBackend`, an arm of the SAPIEN rig)
  takes each tick's targets instead and reports the joints the feedback frames carry;
* **faults on demand** (for watchdog tests): :meth:`inject_fault` (arm status, error code, a joint's
  collision bit), :meth:`pause_feedback` (the stream stops), :meth:`drop_frames` (a fraction of the
  feedback frames, drawn by a seeded generator, never leaves).

Opening the SDK on the virtual bus (piper_sdk 0.6.2; the constructor cannot pass a bus type through,
its ``can_auto_init=True`` path hard-codes socketcan)::

    sdk = C_PiperInterface_V2(channel, judge_flag=False, can_auto_init=False)
    sdk.CreateCanBus(channel, bustype="virtual", judge_flag=False)
    sdk.ConnectPort()

:func:`datafarm.piper.driver.open_sdk` does exactly that for ``bustype="virtual"`` (and shares the
receive bus for sending, as the SDK itself does on Windows and macOS: on Linux it opens a second bus for
sending whose queue nobody reads, which on a virtual channel grows with every frame). The SDK keeps one
interface per channel name for the life of the process, so tests use a fresh channel name each.
"""

from __future__ import annotations

import logging
import math
import random
import struct
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Protocol, Self

import can

log = logging.getLogger(__name__)

# CAN ids (piper_sdk piper_msgs/msg_v2/can_id.py)
STATUS_ID = 0x2A1
JOINT_FEEDBACK_IDS = (0x2A5, 0x2A6, 0x2A7)
GRIPPER_FEEDBACK_ID = 0x2A8
DRIVER_LOW_SPEED_IDS = tuple(range(0x261, 0x267))
FEEDBACK_IDS = (STATUS_ID, *JOINT_FEEDBACK_IDS, GRIPPER_FEEDBACK_ID, *DRIVER_LOW_SPEED_IDS)
MOTION_CTRL_1_ID = 0x150
MOTION_CTRL_2_ID = 0x151
JOINT_CTRL_IDS = (0x155, 0x156, 0x157)
GRIPPER_CTRL_ID = 0x159
MOTOR_ENABLE_ID = 0x471
COMMAND_IDS = (MOTION_CTRL_1_ID, MOTION_CTRL_2_ID, *JOINT_CTRL_IDS, GRIPPER_CTRL_ID, MOTOR_ENABLE_ID)

# values (piper_sdk msg_v2 feedback/transmit enums)
CTRL_STANDBY, CTRL_CAN = 0x00, 0x01
MOVE_J = 0x01
STATUS_NORMAL, STATUS_EMERGENCY_STOP, STATUS_COLLISION = 0x00, 0x01, 0x07
ESTOP, ESTOP_RESUME = 0x01, 0x02
ENABLE, DISABLE = 0x02, 0x01
FOC_COLLISION, FOC_DRIVER_ERROR, FOC_ENABLED = 1 << 4, 1 << 5, 1 << 6
GRIPPER_ENABLED = 1 << 6

# the firmware's joint limits, deg (the SDK's JointCtrl table)
JOINT_LIMITS_DEG = ((-150.0, 150.0), (0.0, 180.0), (-170.0, 0.0), (-100.0, 100.0), (-70.0, 70.0), (-120.0, 120.0))
GRIPPER_MAX_UM = 70_000


def rad_to_mdeg(value: float) -> int:
    """The SDK's joint unit: 0.001 deg."""
    return round(math.degrees(value) * 1000)


def mdeg_to_rad(value: int) -> float:
    return math.radians(value / 1000)


@dataclass
class FakeFirmwareConfig:
    feedback_hz: float = 200.0
    driver_info_every: int = 10  # 0x261-0x266 every 10th tick (20 Hz): the enable and collision bits
    time_constant_s: float = 0.04
    max_joint_speed_rad_s: float = 3.0  # at 100 % speed (the SDK's 0x474 maximum)
    gripper_speed_m_s: float = 0.1
    initial_joints_rad: tuple[float, ...] = (0.0, 1.2, -1.0, 0.0, 0.9, 0.0)  # the rig's rest pose
    initial_gripper_m: float = 0.04


class JointBackend(Protocol):
    """What moves the joints: the firmware's tick hands it the arm's targets and reads the joints back.

    ``drive`` is called once per firmware tick (200 Hz) with the firmware's lock held, so it must be quick
    (set a target, no physics): a backend stepping a simulation does so from its own single owner."""

    def drive(self, targets: list[float], gripper_target: float, moving: bool) -> None:
        """The targets (6 rad, m) to follow; `moving` False: hold (motors off or emergency stop)."""

    def measured(self) -> tuple[list[float], float]:
        """The six joints (rad) and the gripper opening (m) the feedback reports now."""


@dataclass
class _ArmModel:
    """The simulated arm, in floats (rad, m); encoded to the SDK's integers on the way out."""

    joints: list[float]
    gripper: float
    targets: list[float] = field(default_factory=list)
    gripper_target: float = 0.0
    motors_enabled: list[bool] = field(default_factory=lambda: [False] * 6)
    gripper_enabled: bool = False
    ctrl_mode: int = CTRL_STANDBY
    move_mode: int = MOVE_J
    speed_pct: int = 0
    estopped: bool = False
    arm_status: int = STATUS_NORMAL  # injected status (the emergency stop overrides it in the report)
    err_code: int = 0
    collision_joint: int | None = None

    def __post_init__(self) -> None:
        self.targets = list(self.joints)
        self.gripper_target = self.gripper


class FakePiperFirmware:
    """One fake arm on one virtual CAN channel. ``start()`` opens the bus and the thread; ``stop()`` ends both."""

    def __init__(self, channel: str, config: FakeFirmwareConfig | None = None, backend: JointBackend | None = None):
        self.channel = channel
        self.config = config or FakeFirmwareConfig()
        self.backend = backend  # None: the first-order model in _step
        self.received: Counter[int] = Counter()  # frames received, by CAN id
        self.sent: Counter[int] = Counter()  # feedback frames sent, by CAN id
        self.received_log: deque[tuple[float, int, bytes]] = deque(maxlen=4096)
        self.drops = 0  # times the "resume" cut power to enabled motors (a real arm falls)
        joints, gripper = backend.measured() if backend else (list(self.config.initial_joints_rad),
                                                              self.config.initial_gripper_m)
        self._arm = _ArmModel(list(joints), gripper)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bus: can.BusABC | None = None
        self._feedback_paused = False
        self._drop_fraction = 0.0
        self._drop_rng = random.Random(0)  # seeded: a test sees the same losses every run
        self._tick = 0

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self) -> FakePiperFirmware:
        if self._thread is not None:
            raise RuntimeError(f"the fake firmware on {self.channel!r} is already running")
        self._bus = can.Bus(interface="virtual", channel=self.channel, receive_own_messages=False)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"fake-piper-{self.channel}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            if self._thread.is_alive():
                log.error("fake firmware thread on %s did not stop within 2 s", self.channel)
            self._thread = None
        if self._bus is not None:
            self._bus.shutdown()
            self._bus = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- what a test reads ----------------------------------------------------------------------------
    def joints_rad(self) -> list[float]:
        with self._lock:
            return list(self._arm.joints)

    def gripper_m(self) -> float:
        with self._lock:
            return self._arm.gripper

    def encoded_joints(self) -> list[int]:
        """The joint values exactly as the last feedback frames carry them (0.001 deg)."""
        with self._lock:
            return [rad_to_mdeg(q) for q in self._arm.joints]

    def encoded_gripper(self) -> int:
        with self._lock:
            return round(self._arm.gripper * 1e6)

    @property
    def estopped(self) -> bool:
        with self._lock:
            return self._arm.estopped

    @property
    def enabled(self) -> bool:
        with self._lock:
            return all(self._arm.motors_enabled)

    @property
    def ctrl_mode(self) -> int:
        with self._lock:
            return self._arm.ctrl_mode

    @property
    def speed_pct(self) -> int:
        with self._lock:
            return self._arm.speed_pct

    def command_frames(self) -> int:
        """How many command frames (enable, modes, joints, gripper, emergency stop) reached the arm."""
        with self._lock:
            return sum(self.received[i] for i in COMMAND_IDS)

    def joint_targets_received(self) -> list[tuple[int, int]]:
        """Every joint target pair received, as (CAN id, first value), in order (0.001 deg)."""
        with self._lock:
            return [(i, struct.unpack(">i", data[:4])[0]) for _, i, data in self.received_log if i in JOINT_CTRL_IDS]

    # -- what a test sets -----------------------------------------------------------------------------
    def set_state(self, joints_rad, gripper_m: float | None = None) -> None:
        """Teleport the arm (and its targets) to these joints: a test's known pose."""
        with self._lock:
            self._arm.joints = [float(q) for q in joints_rad]
            self._arm.targets = list(self._arm.joints)
            if gripper_m is not None:
                self._arm.gripper = self._arm.gripper_target = float(gripper_m)

    def inject_fault(self, *, arm_status: int | None = None, err_code: int | None = None,
                     collision_joint: int | None = None) -> None:
        """Report an arm status (e.g. 0x07 collision), a 16-bit error code, or a joint's collision bit (1-6)."""
        with self._lock:
            if arm_status is not None:
                self._arm.arm_status = arm_status
            if err_code is not None:
                self._arm.err_code = err_code
            if collision_joint is not None:
                self._arm.collision_joint = collision_joint

    def pause_feedback(self, paused: bool = True) -> None:
        """Stop (or restart) every feedback frame: the stream is lost."""
        with self._lock:
            self._feedback_paused = paused

    def drop_frames(self, fraction: float) -> None:
        """Drop this fraction of feedback frames (each frame by a seeded draw), 0 for none."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"a drop fraction is in [0, 1], got {fraction}")
        with self._lock:
            self._drop_fraction = fraction

    # -- the firmware loop -----------------------------------------------------------------------------
    def _run(self) -> None:
        period = 1.0 / self.config.feedback_hz
        next_tick = time.monotonic()
        while not self._stop.is_set():
            try:
                self._receive_all()
                with self._lock:
                    self._step(period)
                    frames = self._feedback_frames()
                for frame in frames:
                    self._bus.send(frame)
            except can.CanOperationError as error:  # the bus closed under us: end quietly
                log.debug("fake firmware on %s: %s", self.channel, error)
                break
            self._tick += 1
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay < -0.1:  # starved (a busy machine): do not burst to catch up
                next_tick = time.monotonic()
            self._stop.wait(max(0.0, delay))

    def _receive_all(self) -> None:
        while (message := self._bus.recv(timeout=0.0)) is not None:
            with self._lock:
                self.received[message.arbitration_id] += 1
                self.received_log.append((time.time(), message.arbitration_id, bytes(message.data)))
                self._handle(message.arbitration_id, bytes(message.data))

    def _handle(self, can_id: int, data: bytes) -> None:
        arm = self._arm
        if can_id == MOTION_CTRL_1_ID:
            if data[0] == ESTOP:
                arm.estopped = True
                arm.targets, arm.gripper_target = list(arm.joints), arm.gripper  # freeze where it is
                log.info("fake firmware %s: emergency stop", self.channel)
            elif data[0] == ESTOP_RESUME:
                if any(arm.motors_enabled):
                    self.drops += 1
                    log.warning("fake firmware %s: resume after emergency stop cut motor power (a real arm drops)",
                                self.channel)
                arm.estopped = False
                arm.arm_status, arm.err_code, arm.collision_joint = STATUS_NORMAL, 0, None
                arm.motors_enabled = [False] * 6
                arm.gripper_enabled = False
                arm.ctrl_mode = CTRL_STANDBY
        elif can_id == MOTOR_ENABLE_ID:
            motor, flag = data[0], data[1]
            motors = range(6) if motor in (7, 0xFF) else [motor - 1] if 1 <= motor <= 6 else []
            for i in motors:
                arm.motors_enabled[i] = flag == ENABLE
            if motor in (7, 0xFF):
                arm.gripper_enabled = flag == ENABLE
            arm.targets = list(arm.joints)  # enabling never jumps
        elif can_id == MOTION_CTRL_2_ID:
            if not arm.estopped:
                arm.ctrl_mode, arm.move_mode, arm.speed_pct = data[0], data[1], min(int(data[2]), 100)
        elif can_id in JOINT_CTRL_IDS:
            if arm.estopped or arm.ctrl_mode != CTRL_CAN or arm.move_mode != MOVE_J:
                return
            first = JOINT_CTRL_IDS.index(can_id) * 2
            for i, value in zip((first, first + 1), struct.unpack(">ii", data)):
                low, high = JOINT_LIMITS_DEG[i]
                arm.targets[i] = math.radians(min(max(value / 1000, low), high))
        elif can_id == GRIPPER_CTRL_ID:
            angle_um, _effort, code = struct.unpack(">ihB", data[:7])
            if code in (0x00, 0x02):
                arm.gripper_enabled = False
            elif code in (0x01, 0x03):
                arm.gripper_enabled = True
            if arm.gripper_enabled and not arm.estopped:
                arm.gripper_target = min(max(angle_um, 0), GRIPPER_MAX_UM) / 1e6

    def _step(self, dt: float) -> None:
        arm = self._arm
        if self.backend is not None:
            moving = not arm.estopped and all(arm.motors_enabled)
            self.backend.drive(list(arm.targets), arm.gripper_target, moving)
            joints, arm.gripper = self.backend.measured()
            arm.joints = list(joints)
            return
        if arm.estopped:
            return
        max_step = self.config.max_joint_speed_rad_s * arm.speed_pct / 100 * dt
        gain = min(1.0, dt / self.config.time_constant_s)
        for i in range(6):
            if arm.motors_enabled[i]:
                step = (arm.targets[i] - arm.joints[i]) * gain
                arm.joints[i] += min(max(step, -max_step), max_step)
        if arm.gripper_enabled:
            limit = self.config.gripper_speed_m_s * dt
            arm.gripper += min(max((arm.gripper_target - arm.gripper) * gain, -limit), limit)

    def _feedback_frames(self) -> list[can.Message]:
        if self._feedback_paused:
            return []
        arm = self._arm
        status = STATUS_EMERGENCY_STOP if arm.estopped else arm.arm_status
        moving = any(abs(t - q) > 1e-4 for t, q in zip(arm.targets, arm.joints))
        mdeg = [rad_to_mdeg(q) for q in arm.joints]
        frames = [
            (STATUS_ID, struct.pack(">BBBBBBH", arm.ctrl_mode, status, arm.move_mode, 0, int(moving), 0, arm.err_code)),
            (JOINT_FEEDBACK_IDS[0], struct.pack(">ii", mdeg[0], mdeg[1])),
            (JOINT_FEEDBACK_IDS[1], struct.pack(">ii", mdeg[2], mdeg[3])),
            (JOINT_FEEDBACK_IDS[2], struct.pack(">ii", mdeg[4], mdeg[5])),
            (GRIPPER_FEEDBACK_ID, struct.pack(">ihBB", round(arm.gripper * 1e6), 0,
                                              GRIPPER_ENABLED if arm.gripper_enabled else 0, 0)),
        ]
        if self._tick % self.config.driver_info_every == 0:
            for i, can_id in enumerate(DRIVER_LOW_SPEED_IDS):
                foc = (FOC_ENABLED if arm.motors_enabled[i] else 0) | (
                    FOC_COLLISION if arm.collision_joint == i + 1 else 0)
                frames.append((can_id, struct.pack(">HhbBH", 240, 30, 30, foc, 0)))  # 24.0 V, 30 C, 30 C
        out = []
        for can_id, data in frames:
            if self._drop_fraction > 0.0 and self._drop_rng.random() < self._drop_fraction:
                continue
            self.sent[can_id] += 1
            out.append(can.Message(arbitration_id=can_id, data=data, is_extended_id=False))
        return out
