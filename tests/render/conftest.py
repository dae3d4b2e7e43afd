"""Fixtures for render and review tests: a real (shortened) sim episode and real RoboMIND reference frames."""

import json
from pathlib import Path

import numpy as np
import pytest

from datafarm.media import iter_frames, read_video, write_video
from datafarm.sim.recorder import RecordedEpisode, save_npz

ROBOMIND = Path(__file__).resolve().parents[2] / "shared" / "data" / "agilex_robomind" / "videos"
if not ROBOMIND.exists():
    ROBOMIND = Path("/work/shared/data/agilex_robomind/videos")
FRAME_STEP = 5  # keep every 5th frame: the whole motion, a fifth of the frames


def robomind_frames(count: int = 3) -> list[np.ndarray]:
    """Real frames of the AgileX rig (640 x 368): the first `count` frames 60 apart of two clips."""
    frames = []
    for name in ("AX-AppleBluePlate", "AX-PackBowl"):
        clip = []
        for index, frame in enumerate(iter_frames(ROBOMIND / f"{name}.mp4")):
            if index % 60 == 0:
                clip.append(frame)
            if len(clip) == count:
                break
        frames.extend(clip)
    return frames


def shorten_episode(source: Path, target: Path, step: int = FRAME_STEP) -> RecordedEpisode:
    """A copy of a recorded episode keeping every `step`-th frame (time stamps rewritten at the same fps)."""
    meta = json.loads((source / "episode.json").read_text())
    with np.load(source / "data.npz") as data:
        rows = {k: data[k][::step] for k in data.files}
    rows["time"] = np.arange(len(rows["time"])) / meta["fps"]
    target.mkdir(parents=True)
    save_npz(target / "data.npz", rows)
    for camera in meta["cameras"]:
        folder = target / "cameras" / camera
        folder.mkdir(parents=True)
        with np.load(source / "cameras" / camera / "frames.npz") as data:
            save_npz(folder / "frames.npz", {k: data[k][::step] for k in data.files})
        write_video(folder / "rgb.mp4", read_video(source / "cameras" / camera / "rgb.mp4")[::step], meta["fps"])
    meta["frames"] = len(rows["time"])
    (target / "episode.json").write_text(json.dumps(meta))
    return RecordedEpisode.load(target)


def sim_episode_dir(tmp_path_factory) -> Path:
    """apple_on_scale seed 0, simulated once per session (shared by tests/render and tests/review)."""
    root = tmp_path_factory.getbasetemp() / "render_review_episode"
    short = root / "short"
    if not (short / "episode.json").exists():
        from datafarm.library import get_task
        from datafarm.task.rollout import run_episode

        result = run_episode(get_task("apple_on_scale"), 0, record_dir=root / "full")
        (root / "verdict.json").write_text(json.dumps(result.verdict.to_dict()))
        shorten_episode(root / "full", short)
    return root


@pytest.fixture(scope="session")
def sim_episode(tmp_path_factory) -> RecordedEpisode:
    return RecordedEpisode.load(sim_episode_dir(tmp_path_factory) / "short")


@pytest.fixture(scope="session")
def references() -> dict[str, list[np.ndarray]]:
    frames = robomind_frames()
    return {"head": frames[:3], "left_wrist": frames[3:], "right_wrist": frames[3:]}
