"""What a closed-loop trial asks of a policy, and the scripted policies every report compares against.

A policy is anything with `reset()` and `act(frames, state) -> (14,)`: `frames` maps farm camera
names (head, left_wrist, right_wrist) to the rendered (H, W, 3) uint8 views of this control tick,
`state` is the rig's 14-D joint state (rad / m). A trained lerobot checkpoint is one
(`datafarm.policy.inference.load_lerobot_policy`); the controls here are the others:

- do-nothing: holds the pose it started in (must score about 0%: the judge rejects it);
- blind replay: the actions of one training episode, replayed open-loop whatever the cameras show
  (a policy that does not beat it is not using its cameras);
- replay of the expert's own recorded actions on the SAME seed: succeeds when the evaluation path is
  faithful to the farm's (tests use it).

The expert itself (the ceiling) is not a policy: it reads privileged state; evaluate.py runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from datafarm.errors import BadInput
from datafarm.sim.recorder import RecordedEpisode


class Policy(Protocol):
    """`cameras` (optional, default all three): the views the policy looks at; a trial renders only
    those, and none for a blind control (empty)."""

    def reset(self) -> None: ...

    def act(self, frames: dict[str, np.ndarray], state: np.ndarray) -> np.ndarray: ...


class DoNothing:
    """Holds the joint state of the first tick for the whole trial."""

    cameras: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._hold: np.ndarray | None = None

    def reset(self) -> None:
        self._hold = None

    def act(self, frames: dict[str, np.ndarray], state: np.ndarray) -> np.ndarray:
        if self._hold is None:
            self._hold = np.asarray(state, dtype=np.float64).copy()
        return self._hold


class ActionReplay:
    """Plays a fixed (T, 14) action sequence open-loop, then holds its last action."""

    def __init__(self, actions: np.ndarray, cameras: tuple[str, ...] = ()):
        self.cameras = tuple(cameras)  # rendered though unused: tests run the whole evaluation path with it
        actions = np.asarray(actions, dtype=np.float64)
        if actions.ndim != 2 or actions.shape[1] != 14 or len(actions) == 0:
            raise BadInput(f"a replay needs (T, 14) actions, got {actions.shape}")
        self.actions = actions
        self._t = 0

    def reset(self) -> None:
        self._t = 0

    def act(self, frames: dict[str, np.ndarray], state: np.ndarray) -> np.ndarray:
        action = self.actions[min(self._t, len(self.actions) - 1)]
        self._t += 1
        return action


def recorded_actions(sim_dir: str | Path) -> np.ndarray:
    """The (T, 14) actions a recorded episode (episodes/NNNNNN/sim) applied, in order."""
    return RecordedEpisode.load(sim_dir).data()["action"]
