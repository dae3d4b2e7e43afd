"""A synthetic calibration episode from the simulated rig, written as a LeRobot v3.0 dataset.

For development and tests where no real recording exists. It is labelled synthetic everywhere:
``datafarm_calibration.json`` in the dataset root holds ``{"synthetic": true, ...}`` and the LeRobot
task string is ``"calibration"``; `load_calibration` of it gives ``synthetic=True``.

Without a task: the rig alone (table, arms) performs the scripted motion of `datafarm.sim.show`.
With a built-in task: the task's scene is built (seed 0) and the arms only roll their wrists and
open and close their grippers in place (they never reach into the scene, so nothing is disturbed).
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

import numpy as np

from datafarm.calibration.episode import PROVENANCE_FILE
from datafarm.sim.spaces import JOINTS_PER_ARM, SIDES, arm_slice

log = logging.getLogger(__name__)

CALIBRATION_TASK_STRING = "calibration"
SYNTH_SOURCE = "datafarm synth-calibration"
_WRIST_ROLL_RAD = 0.6
_WRIST_ROLL_PERIOD_S = 2.0
_SETTLE_SECONDS = 0.5  # run_episode waits this long after the expert returns


class InPlaceMotionExpert:
    """An expert that moves without reaching: wrist roll and gripper opening swing about the rest pose."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def solve(self, env, skills, params) -> None:
        start = env.hold_action()
        steps = max(1, round(self.seconds / env.rig.control_dt))
        upper = env.rig.upper
        for step in range(steps):
            phase = np.sin(2 * np.pi * step * env.rig.control_dt / _WRIST_ROLL_PERIOD_S)
            action = start.copy()
            for side in SIDES:
                arm = arm_slice(side)
                action[arm.start + JOINTS_PER_ARM - 1] += _WRIST_ROLL_RAD * phase  # joint 6: wrist roll
                action[arm.start + JOINTS_PER_ARM] = upper[arm.start + JOINTS_PER_ARM] * (0.5 + 0.5 * phase)
            env.step(action)


def _record_rig_alone(episode_dir: Path, frames: int) -> None:
    from datafarm.sim.recorder import EpisodeRecorder
    from datafarm.sim.rig import DualArmRig
    from datafarm.sim.show import scripted_actions

    rig = DualArmRig.create()
    actions = scripted_actions(rig)
    if len(actions) < frames:  # hold the last pose for the rest of the recording
        actions = np.concatenate([actions, np.repeat(actions[-1:], frames - len(actions), axis=0)])
    with EpisodeRecorder(rig, episode_dir, metadata={"source": SYNTH_SOURCE}) as recorder:
        for action in actions[:frames]:
            recorder.record(action)


def _record_task_scene(episode_dir: Path, task: str, seconds: float) -> None:
    from datafarm.library import get_task
    from datafarm.task.rollout import run_episode

    package = get_task(task)
    result = run_episode(package, seed=0, record_dir=episode_dir, wall_limit=None,
                         expert=InPlaceMotionExpert(max(seconds - _SETTLE_SECONDS, 0.1)))
    if result.error:
        raise RuntimeError(f"recording the {task!r} scene for a synthetic calibration failed: {result.error}")


def synth_calibration(output: str | Path, task: str | None = None, seconds: float = 4.0) -> Path:
    """Record a synthetic calibration episode and write it as a one-episode LeRobot dataset at `output`.

    `task`: a built-in task name (its scene is built) or None (the rig alone). Returns `output`."""
    from datafarm.dataset.harvest import HarvestItem, harvest  # here: datafarm.dataset imports this package

    output = Path(output)
    if output.exists():
        raise FileExistsError(f"{output} already exists; remove it or choose another output folder")
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    with tempfile.TemporaryDirectory(prefix="datafarm-synth-calibration-") as scratch:
        episode_dir = Path(scratch) / "episode"
        if task is None:
            from datafarm.sim.config import load_rig_config

            _record_rig_alone(episode_dir, max(2, round(seconds * load_rig_config().timing.control_hz)))
        else:
            _record_task_scene(episode_dir, task, seconds)
        from datafarm.sim.recorder import RecordedEpisode

        fps = int(RecordedEpisode.load(episode_dir).meta["fps"])
        report = harvest([HarvestItem(episode_dir)], output, "datafarm/synthetic_calibration", fps,
                         CALIBRATION_TASK_STRING)
    provenance = {"synthetic": True, "task": task, "source": SYNTH_SOURCE, "seconds": report.recorded_seconds,
                  "note": "recorded in the simulated rig; not real footage"}
    (output / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2))
    log.info("synthetic calibration (%s) written to %s: %d frames", task or "rig alone", output, report.frames)
    return output


__all__ = ["CALIBRATION_TASK_STRING", "InPlaceMotionExpert", "synth_calibration"]
