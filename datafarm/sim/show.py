"""`datafarm sim show`: record a short scripted motion of both arms and make pictures of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from datafarm.media import write_video
from datafarm.sim.config import load_rig_config
from datafarm.sim.recorder import EpisodeRecorder, RecordedEpisode
from datafarm.sim.rig import DualArmRig
from datafarm.sim.spaces import JOINTS_PER_ARM
from datafarm.sim.trajectory import quintic_trajectory
from datafarm.viz import contact_sheet, tile_views

# Left-arm keyframes (six joints, gripper opening); the right arm mirrors them (joints 1, 4, 6).
_KEYFRAMES = [
    [0.0, 1.2, -1.0, 0.0, 0.9, 0.0, 0.04],     # rest
    [0.3, 1.75, -1.25, 0.0, 1.05, 0.0, 0.07],  # reach forward and down, open
    [0.3, 1.75, -1.25, 0.0, 1.05, 0.0, 0.0],   # close the gripper
    [0.3, 1.35, -1.05, 0.3, 0.7, 0.9],         # lift, turn the wrist
    [0.0, 1.2, -1.0, 0.0, 0.9, 0.0, 0.04],     # back to rest
]
_MIRROR = np.array([-1, 1, 1, -1, 1, -1, 1.0])


def scripted_actions(rig: DualArmRig, speed: float = 0.5) -> np.ndarray:
    """(N, 14) actions visiting the keyframes at `speed` x the joint velocity limit."""
    arm = rig.arms["left"]
    actions = [rig.rest_state()]
    for frame in _KEYFRAMES[1:]:
        goal_left = np.array(frame + [actions[-1][JOINTS_PER_ARM]] * (7 - len(frame)))
        goal = np.concatenate([goal_left, goal_left * _MIRROR])
        limits = np.concatenate([arm.max_velocity, arm.max_velocity]) * speed
        actions.extend(quintic_trajectory(actions[-1], goal, rig.control_dt, limits, 5.0 * speed,
                                          min_duration=0.4))
        actions.extend([goal] * 3)  # a short pause at each keyframe
    return np.asarray(actions)


@dataclass
class ShowResult:
    episode: Path
    contact_sheet: Path
    preview: Path
    frames: int


def show(output: str | Path, resolution: tuple[int, int] = (320, 240),
         progress: Callable[[int, int], None] | None = None) -> ShowResult:
    """Record the scripted motion into `output`/episode and write a contact sheet and a preview mp4."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    rig = DualArmRig.create(load_rig_config(resolution=resolution))
    actions = scripted_actions(rig)
    with EpisodeRecorder(rig, output / "episode", metadata={"source": "datafarm sim show"}) as recorder:
        for i, action in enumerate(actions):
            recorder.record(action)
            if progress:
                progress(i + 1, len(actions))
    episode = RecordedEpisode.load(output / "episode")
    streams = {name: episode.rgb(name) for name in episode.cameras}
    times = episode.data()["time"]
    sheet = output / "contact_sheet.png"
    contact_sheet(streams, times, title="DataFarm rig: scripted motion (sim RGB)").save(sheet)
    preview = output / "preview.mp4"
    write_video(preview, (tile_views([streams[n][t] for n in episode.cameras]) for t in range(len(times))),
                fps=episode.meta["fps"])
    return ShowResult(output / "episode", sheet, preview, len(times))
