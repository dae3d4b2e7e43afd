"""Hardware in the loop, simulated: two fake PiPER firmwares on the virtual CAN bus driving one SAPIEN rig.

piper_sdk's own code (through :class:`~datafarm.piper.driver.PiperPair`, ``bustype="virtual"``) talks to
two :class:`~datafarm.piper.fake_firmware.FakePiperFirmware` (left, right), each with a
:class:`RigArmBackend` instead of its first-order joint model:

* a joint or gripper command received over CAN becomes that arm's drive target on the rig (the firmware
  tick only stores it; no physics in a firmware thread);
* :class:`RigLoop` is the ONE stepping owner (SAPIEN is not thread-safe): a thread that, at the rig's
  control rate (30 Hz), takes both arms' latest targets, steps the rig once (``rig.step``, or the trial's
  ``TaskEnv.step`` so the hidden judge's trace is recorded) under :attr:`RigLoop.lock`, and snapshots
  the joints, which the firmwares' 200 Hz feedback frames then report;
* anything else touching the rig (rendering the cameras, freezing the judge's trace) takes the same lock.

:class:`HilStation` is an evaluation station on this stack: per trial the eval seed's scene is built with
``episode_world`` exactly as :class:`~datafarm.piper.eval_station.SimStation` builds it
(:class:`datafarm.policy.trials.Trial`), two firmwares on fresh channel names are started on its rig, and
a real-driver :class:`PiperPair` (safety layer, watchdog, SDK) is connected to them. The trial runs in
real mode (wall-clock pacing, ``simulated = False``). Cameras: the frames are rendered from the trial's
rig (as SimStation does) rather than through lerobot's camera classes, which have no simulated device.

Limits: the firmware's speed percentage is not modelled on the rig (the rig's own joint velocity limits
apply). A rig loop that dies (an exception in the step, e.g. the scene's step limit) makes both firmwares
report error code 0x0001, which the watchdog turns into an emergency stop; the reason is logged and kept
in :attr:`RigLoop.failure`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from datafarm.errors import SafetyStop, Unavailable
from datafarm.piper.arm_pair import ArmPair
from datafarm.piper.driver import PiperPair, PiperPairConfig
from datafarm.piper.eval_station import PreflightResult, Station, check_and_home
from datafarm.piper.fake_firmware import FakePiperFirmware
from datafarm.piper.safety import SafetyLayer
from datafarm.sim.rig import DualArmRig
from datafarm.sim.spaces import JOINTS_PER_ARM, SIDES, arm_slice

if TYPE_CHECKING:
    from datafarm.policy.trials import Trace, Trial, TrialJudge, TrialSetup

log = logging.getLogger(__name__)

HIL_SCENE_STEP_HEADROOM = 4  # the scene's step budget in hardware in the loop, as a multiple of the task's
RIG_FAILURE_ERR_CODE = 0x0001  # reported by both firmwares when the rig loop dies (the joint-communication bit)


class RigLoop:
    """Steps `rig` at its control rate from one thread; the arms' backends hand it targets and read joints."""

    def __init__(self, rig: DualArmRig, step: Callable[[np.ndarray], Any] | None = None):
        self.rig = rig
        self.lock = threading.RLock()  # every SAPIEN call on this rig happens under it
        self.rate_hz = float(rig.config.timing.control_hz)
        self.steps = 0
        self.late = 0  # periods the stepping thread fell more than half a period behind
        self._step = step or rig.step
        self._targets = rig.drive_target()  # what the next step drives towards (14-D)
        self._measured = rig.qpos()  # the joints after the last step
        self._data_lock = threading.Lock()  # targets and snapshot only: never held across a SAPIEN call
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: str | None = None  # why the loop stopped stepping on its own (e.g. the episode's step limit)
        self.on_failure: list[Callable[[str], None]] = []  # told once, from the loop's thread

    def backend(self, side: str) -> RigArmBackend:
        if side not in SIDES:
            raise Unavailable(f"the rig has arms {SIDES}, not {side!r}: use 'left' or 'right'")
        return RigArmBackend(self, side)

    def set_arm_target(self, side: str, axes: np.ndarray) -> None:
        with self._data_lock:
            self._targets[arm_slice(side)] = axes

    def hold_arm(self, side: str) -> None:
        """Hold where the arm is: its target becomes its last measured pose."""
        with self._data_lock:
            self._targets[arm_slice(side)] = self._measured[arm_slice(side)]

    def measured_arm(self, side: str) -> np.ndarray:
        with self._data_lock:
            return self._measured[arm_slice(side)].copy()

    def start(self) -> RigLoop:
        if self._thread is not None:
            raise Unavailable("the rig loop is already running: stop() it before starting it again")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rig-loop", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            if self._thread.is_alive():
                log.error("the rig loop did not stop within 5 s")
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def step_once(self) -> None:
        """One control period towards the arms' latest targets, then a fresh joint snapshot."""
        with self._data_lock:
            target = self._targets.copy()
        with self.lock:
            self._step(target)
            measured = self.rig.qpos()
        with self._data_lock:
            self._measured = measured
        self.steps += 1

    def _run(self) -> None:
        period = 1.0 / self.rate_hz
        next_tick = time.monotonic()
        while not self._stop.is_set():
            try:
                self.step_once()
            except Exception as error:  # a dead loop must not look like a frozen arm with fresh feedback
                self.failure = f"the simulated rig stopped stepping: {type(error).__name__}: {error}"
                log.exception("%s", self.failure)
                for tell in self.on_failure:
                    tell(self.failure)
                return
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay < -period / 2:  # behind (a busy machine): count it, do not burst to catch up
                self.late += 1
                next_tick = time.monotonic()
            self._stop.wait(max(0.0, delay))


class RigArmBackend:
    """One arm of a :class:`RigLoop` as a fake firmware's :class:`~datafarm.piper.fake_firmware.JointBackend`."""

    def __init__(self, loop: RigLoop, side: str):
        self.loop, self.side = loop, side

    def drive(self, targets: list[float], gripper_target: float, moving: bool) -> None:
        if moving:
            self.loop.set_arm_target(self.side, np.array([*targets[:JOINTS_PER_ARM], gripper_target]))
        else:
            self.loop.hold_arm(self.side)

    def measured(self) -> tuple[list[float], float]:
        axes = self.loop.measured_arm(self.side)
        return [float(q) for q in axes[:JOINTS_PER_ARM]], float(axes[JOINTS_PER_ARM])


class LockedTrial:
    """A trial whose trace is frozen under the rig loop's lock (the judge reads it while the loop steps)."""

    def __init__(self, trial: Trial, loop: RigLoop):
        self.trial, self.loop = trial, loop

    @property
    def rig(self) -> DualArmRig:
        return self.trial.rig

    def trace(self) -> Trace:
        with self.loop.lock:
            return self.trial.trace()

    def observe(self) -> dict[str, np.ndarray]:
        with self.loop.lock:
            return self.trial.observe()


class HilStation(Station):
    """Real-mode trials (PiperPair over piper_sdk, virtual CAN) on fake firmwares driving the seed's rig."""

    simulated = False  # the real driver's path: wall-clock pacing, feedback ages, the SDK

    def __init__(self, setup: TrialSetup, judge: TrialJudge, config: PiperPairConfig | None = None,
                 owns_judge: bool = False, channel_prefix: str = "hil"):
        self.setup, self.judge, self.owns_judge = setup, judge, owns_judge
        self.config = (config or PiperPairConfig()).model_copy(update={"bustype": "virtual"})
        self.rate_hz = setup.rig_config.timing.control_hz
        self.channel_prefix = channel_prefix
        self.trial: LockedTrial | None = None
        self.loop: RigLoop | None = None
        self.firmwares: dict[str, FakePiperFirmware] = {}
        self._pair: PiperPair | None = None

    @property
    def pair(self) -> ArmPair:
        if self._pair is None:
            raise Unavailable("the hardware-in-the-loop station has no arms yet: call start_trial() first")
        return self._pair

    def preflight(self) -> PreflightResult:
        """The real preflight (fresh feedback, no error, slow move) on the rest-pose rig through the CAN stack."""
        rig = DualArmRig.create(self.setup.rig_config.model_copy(update={"cameras": {}}))
        rig.reset(rig.rest_state() + 0.1)
        self._bring_up(rig, None, "preflight")
        try:
            return check_and_home(self.pair, rig.rest_state(), self.rate_hz, real_time=True)
        finally:
            self._tear_down()

    def start_trial(self, seed: int, cameras: tuple[str, ...]) -> None:
        from datafarm.policy.trials import Trial

        self._tear_down()
        trial = Trial(self.setup, seed, "original", self.judge, cameras=cameras)
        # the rig steps on the wall clock from here on: through the policy's warm-up, the operator's go and
        # every late control tick. The trial ends on the control loop's ticks, so the scene's own step budget
        # gets headroom instead of stopping a slow loop's trial midway (EpisodeTimeout: an emergency stop)
        trial.env.max_steps *= HIL_SCENE_STEP_HEADROOM
        # the renderer's first frame (pipelines, textures: seconds, holding the GIL) before the CAN stack runs,
        # or its feedback threads starve and the watchdog stops the arms; real cameras have no such cost
        trial.observe()
        self._bring_up(trial.rig, trial.env.step, str(seed))
        self.trial = LockedTrial(trial, self.loop)

    def frames(self) -> dict[str, np.ndarray]:
        if self.trial is None:
            raise Unavailable("no trial is running on the hardware-in-the-loop station: call start_trial() first")
        return self.trial.observe()

    def end_trial(self) -> None:
        if self._pair is not None:
            try:
                self._pair.stop()
            except SafetyStop as stop:  # already stopped: the hold is the firmware's own
                log.warning("ending the trial on stopped arms: %s", stop)
        if self.loop is not None:
            self.loop.stop()  # the trace stays as the trial left it, for the verdict

    def close(self) -> None:
        self._tear_down()
        self.trial = None
        if self.owns_judge:
            self.judge.close()

    def _bring_up(self, rig: DualArmRig, step: Callable[[np.ndarray], Any] | None, label: str) -> None:
        self.loop = RigLoop(rig, step)
        tag = uuid.uuid4().hex[:6]  # the SDK keeps one interface per channel name for the process
        self.firmwares = {side: FakePiperFirmware(f"{self.channel_prefix}-{label}-{side}-{tag}",
                                                  backend=self.loop.backend(side)) for side in SIDES}
        for firmware in self.firmwares.values():
            firmware.start()
        # the rig stopped (e.g. the scene's step limit): the firmwares report an error, the watchdog stops the arms
        self.loop.on_failure.append(self._report_rig_failure)
        self.loop.start()
        config = self.config.model_copy(update={"left_can": self.firmwares["left"].channel,
                                                "right_can": self.firmwares["right"].channel})
        self._pair = PiperPair(config, SafetyLayer(config.safety, rig=rig.config, model=rig.model))
        self._pair.connect()
        log.info("hardware in the loop: PiperPair on %s / %s drives the rig (%s)", config.left_can,
                 config.right_can, label)

    def _report_rig_failure(self, reason: str) -> None:
        for firmware in self.firmwares.values():
            firmware.inject_fault(err_code=RIG_FAILURE_ERR_CODE)

    def _tear_down(self) -> None:
        if self._pair is not None:
            self._pair.disconnect()
            self._pair = None
        if self.loop is not None:
            self.loop.stop()
        for firmware in self.firmwares.values():
            firmware.stop()
        self.firmwares = {}


__all__ = ["HilStation", "LockedTrial", "RigArmBackend", "RigLoop"]
