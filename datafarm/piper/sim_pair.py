"""The simulated dual-PiPER pair: the :class:`~datafarm.piper.arm_pair.ArmPair` contract on our SAPIEN rig.

Flows drive :class:`SimPair` in CI and :class:`~datafarm.piper.driver.PiperPair` in a lab, through the
same calls and the same :class:`~datafarm.piper.safety.SafetyLayer`:

* ``act(target)``: the layer's ``filter(target, rig.qpos())``, then one control period of the rig
  (``rig.step``, or the ``step`` callable given, e.g. a trial's ``TaskEnv.step`` so its trace is kept);
  a :class:`~datafarm.errors.SafetyStop` from the layer stops the pair before the rig sees anything;
* ``observe()``: ``rig.qpos()`` stamped with the rig's simulated time (seconds since its reset; not
  ``time.time()`` as on the real pair: a simulated arm has no wall-clock feedback age);
* the deadline watchdog: once ``act`` has been called, a wall-clock gap longer than ``deadline_s``
  before the next ``act`` / ``observe`` stops the pair (checked inline: SAPIEN is not thread-safe, and
  the simulated arms do not move between calls anyway);
* the emergency stop: the drive targets are frozen where they are (zero velocity feed-forward) and the
  stop latches; ``observe`` / ``act`` raise until ``resume_after_estop(operator_confirmed=True)``, as on
  the real pair (the simulated arms do not fall on resume; the real ones do);
* ``dry_run``: the layer runs and the commands are kept in :attr:`SimPair.commands`, the rig is not stepped.

It takes an existing rig (a trial's scene) or creates one from a rig config name on ``connect``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from datafarm.errors import SafetyStop, Unavailable
from datafarm.piper.arm_pair import ArmPair, PairObservation
from datafarm.piper.safety import SafeCommand, SafetyConfig, SafetyLayer
from datafarm.sim.rig import DualArmRig
from datafarm.sim.spaces import DOF, SIDES

log = logging.getLogger(__name__)


class SimPairConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rig: str = Field("dual_piper", description="rig config to build when no rig is given")
    # Wall clock, longer than the real pair's 0.1 s: a CPU renderer takes a good part of a tick per camera.
    deadline_s: float = Field(0.5, gt=0, description="longest gap between two commands once a control loop runs")
    dry_run: bool = Field(False, description="run the safety layer, keep the commands, do not step the rig")
    safety: SafetyConfig = SafetyConfig()


class SimPair(ArmPair):
    """Both simulated PiPERs (left first, 14-D) through the safety layer and a deadline watchdog."""

    def __init__(self, config: SimPairConfig | None = None, rig: DualArmRig | None = None,
                 step: Callable[[np.ndarray], Any] | None = None, safety: SafetyLayer | None = None):
        self.config = config or SimPairConfig()
        self._rig = rig
        self._owns_rig = rig is None
        self._step = step
        self.safety = safety
        self.commands: deque[tuple[float, np.ndarray]] = deque(maxlen=100_000)  # (rig time, sent 14-D command)
        self._estop_reason: str | None = None
        self._last_act: float | None = None  # monotonic time of the last command: the loop's deadline
        self._connected = False

    @property
    def rig(self) -> DualArmRig:
        if self._rig is None:
            raise Unavailable("the simulated PiPER pair has no rig yet: call connect() first")
        return self._rig

    @property
    def connected(self) -> bool:
        return self._connected

    # -- ArmPair --------------------------------------------------------------------------------------
    def connect(self) -> None:
        if self._rig is None:
            self._rig = DualArmRig.create(self.config.rig)
        if self.safety is None:
            self.safety = SafetyLayer(self.config.safety, rig=self._rig.config, model=self._rig.model)
        measured = self._rig.qpos()
        if measured.shape != (DOF,) or not np.all(np.isfinite(measured)):
            raise Unavailable(f"the simulated rig reports no finite {DOF}-D state ({measured}): reset the rig")
        self._freeze()
        self.safety.reset(measured)
        self._connected = True
        log.info("simulated PiPER pair connected (rig time %.3f s)%s", self._rig.time,
                 " in dry run: the rig is not stepped" if self.config.dry_run else "")

    def observe(self) -> PairObservation:
        self._raise_if_stopped()
        self._check_deadline()
        return PairObservation(position=self.rig.qpos(), stamp=self.rig.time)

    def act(self, target: np.ndarray) -> SafeCommand:
        self._raise_if_stopped()
        self._check_deadline()
        try:
            safe = self.safety.filter(target, self.rig.qpos())
        except SafetyStop as stop:
            self._trip(str(stop))
        if self.config.dry_run:
            log.debug("dry run, the rig would get %s", np.round(safe.command, 4).tolist())
        else:
            (self._step or self.rig.step)(safe.command)
        self.commands.append((self.rig.time, safe.command.copy()))
        self._last_act = time.monotonic()
        return safe

    def stop(self) -> None:
        self._last_act = None
        if self._estop_reason is None and self._connected:
            self._freeze()

    def emergency_stop(self, reason: str) -> None:
        if self._estop_reason is not None:
            return
        log.error("stopping both simulated arms: %s", reason)
        self._last_act = None
        if self._rig is not None:
            self._freeze()
        self._estop_reason = reason

    def resume_after_estop(self, operator_confirmed: bool = False) -> None:
        if self._estop_reason is None:
            return
        if not operator_confirmed:
            raise SafetyStop(
                f"the arms stay stopped ({self._estop_reason}): on the real pair the resume cuts motor power and "
                "the arms fall; support both arms, then call resume_after_estop(operator_confirmed=True)")
        log.warning("operator confirmed: releasing the emergency stop (%s)", self._estop_reason)
        self._estop_reason = None
        self.safety.reset(self.rig.qpos())  # the next motion ramps from where the arms are

    def disconnect(self) -> None:
        self._connected = False
        self._last_act = None
        if self._owns_rig:
            self._rig = None  # SAPIEN frees the scene with its last reference

    @property
    def estopped(self) -> str | None:
        return self._estop_reason

    @property
    def deadline_s(self) -> float:
        return self.config.deadline_s

    # -- internals --------------------------------------------------------------------------------------
    def _check_deadline(self) -> None:
        if self._last_act is None:
            return
        gap = time.monotonic() - self._last_act
        if gap > self.config.deadline_s:
            self._trip(f"the control loop missed its deadline: {1000 * gap:.0f} ms between commands "
                       f"(limit {1000 * self.config.deadline_s:.0f} ms)")

    def _freeze(self) -> None:
        """Hold: each arm's drive target stays where it is, without the velocity feed-forward of a move."""
        for side in SIDES:
            arm = self.rig.arms[side]
            arm.command(arm.drive_target.copy())


__all__ = ["SimPair", "SimPairConfig"]
