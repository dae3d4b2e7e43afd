"""The contract of a dual-arm pair the flows drive: the real PiPER pair, and later a simulated one.

Like lerobot's ``robots/`` (connect, get_observation, send_action, disconnect), reduced to what a
control loop needs. Every vector is 14-D in :data:`datafarm.sim.spaces.AXIS_NAMES` order (left arm
first; six joints in rad, then the gripper opening in m), the same names and units as the farm's datasets.

Life cycle::

    pair.connect()                      # open, enable; nothing moves
    obs = pair.observe()                # measured state + its feedback time
    pair.act(target)                    # through the safety layer, at the control rate
    ...
    pair.stop()                         # end of a control loop: hold where it is (not an emergency stop)
    pair.disconnect()

Rules every implementation keeps:

* ``act`` passes each target through :class:`datafarm.piper.safety.SafetyLayer` and sends only what it
  returns; the first motion after ``connect`` or a resume ramps from the measured pose.
* Any :class:`datafarm.errors.SafetyStop` (raised by the layer, or by the implementation's watchdog)
  stops *both* arms (hold, then emergency stop) before it reaches the caller, and latches: ``observe``
  and ``act`` keep raising until :meth:`ArmPair.resume_after_estop` is called with the operator's
  confirmation. Nothing resumes on its own.
* Once ``act`` has been called, a control loop is running: a gap between two calls longer than the
  implementation's deadline is a safety stop. ``stop`` ends the loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import NoReturn, Self

import numpy as np

from datafarm.errors import SafetyStop
from datafarm.piper.safety import SafeCommand
from datafarm.sim.spaces import AXIS_NAMES


@dataclass(frozen=True)
class PairObservation:
    """The measured 14-D state and when its oldest part was measured (``time.time()`` seconds)."""

    position: np.ndarray  # (14,) rad / m, AXIS_NAMES order
    stamp: float

    def as_dict(self) -> dict[str, float]:
        return {name: float(value) for name, value in zip(AXIS_NAMES, self.position)}


def emergency_stopped(reason: str | None) -> SafetyStop:
    """The error every command raises while an emergency stop is latched, with the operator's way out."""
    return SafetyStop(f"both arms are emergency-stopped: {reason}. Find and fix the cause, support both arms, "
                      "then call resume_after_estop(operator_confirmed=True)")


class ArmPair(ABC):
    """Two arms, left first, driven at a control rate through the safety layer."""

    axis_names: tuple[str, ...] = AXIS_NAMES

    @abstractmethod
    def connect(self) -> None:
        """Open both arms, check their feedback, enable them; moves nothing. Raises Unavailable."""

    @abstractmethod
    def observe(self) -> PairObservation:
        """The measured state; raises SafetyStop (both arms already stopped) if a check fails."""

    @abstractmethod
    def act(self, target: np.ndarray) -> SafeCommand:
        """Filter `target` (14,) through the safety layer and send it; returns what was sent."""

    @abstractmethod
    def stop(self) -> None:
        """End a control loop: hold the measured pose, disarm the deadline. Not an emergency stop."""

    @abstractmethod
    def emergency_stop(self, reason: str) -> None:
        """Hold, then emergency-stop both arms, and latch (idempotent)."""

    @abstractmethod
    def resume_after_estop(self, operator_confirmed: bool = False) -> None:
        """Leave a latched emergency stop: only with the operator's confirmation that the arms are supported."""

    @abstractmethod
    def disconnect(self) -> None:
        """Stop any background checks and close both arms (does not disable or drop them)."""

    @property
    @abstractmethod
    def estopped(self) -> str | None:
        """The latched stop's reason, or None when the pair may move."""

    @property
    @abstractmethod
    def deadline_s(self) -> float:
        """The longest gap between two commands once a control loop runs (a longer one is a safety stop)."""

    # -- for implementations: the stop latch (they keep `_connected`) -------------------------------------
    _connected: bool = False

    def _trip(self, reason: str) -> NoReturn:
        """Emergency-stop both arms for `reason`, then raise the latched stop."""
        self.emergency_stop(reason)
        raise emergency_stopped(self.estopped)

    def _raise_if_stopped(self) -> None:
        """Refuse to observe or act while latched or before connect()."""
        if self.estopped is not None:
            raise emergency_stopped(self.estopped)
        if not self._connected:
            raise SafetyStop(f"the {type(self).__name__} is not connected: call connect() first")

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.disconnect()
