"""A short synthetic recorded episode (the recorder's layout) and reference frames for the wan-vace tests.

Three cameras of 48 x 32 pixels: a table plane, a moving "left_link1" robot block and an "apple", with
depth that increases down the image; written as the recorder writes (rgb.mp4, frames.npz, episode.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from datafarm.media import write_video
from datafarm.sim.recorder import RecordedEpisode, save_npz

CAMERAS = ("head", "left_wrist", "right_wrist")
WIDTH, HEIGHT, FPS = 48, 32, 10
LEGEND = {0: "", 1: "table", 2: "left_link1", 3: "apple"}
INTRINSICS = [[40.0, 0.0, WIDTH / 2], [0.0, 40.0, HEIGHT / 2], [0.0, 0.0, 1.0]]


def robot_box(t: int) -> tuple[slice, slice]:
    x0 = 4 + 2 * t
    return slice(6, 18), slice(x0, x0 + 10)


def write_episode(folder: Path, frames: int = 11) -> RecordedEpisode:
    folder.mkdir(parents=True)
    rows = np.arange(HEIGHT, dtype=np.float32)[:, None] * np.ones((1, WIDTH), np.float32)
    for index, camera in enumerate(CAMERAS):
        rgb = np.zeros((frames, HEIGHT, WIDTH, 3), np.uint8)
        segmentation = np.zeros((frames, HEIGHT, WIDTH), np.uint16)
        depth_mm = np.zeros((frames, HEIGHT, WIDTH), np.uint16)
        for t in range(frames):
            segmentation[t, 12:] = 1
            segmentation[t, 22:28, 30:38] = 3
            segmentation[t][robot_box(t)] = 2
            rgb[t][segmentation[t] == 1] = (150, 120, 90)
            rgb[t][segmentation[t] == 2] = (40, 40, 45)
            rgb[t][segmentation[t] == 3] = (200, 30, 30)
            rgb[t][segmentation[t] == 0] = (90 + 20 * index, 100, 110)
            depth_mm[t] = (600 + 20 * rows).astype(np.uint16)
            depth_mm[t][segmentation[t] == 2] = 400
            depth_mm[t][segmentation[t] == 0] = 0
        extrinsics = np.repeat(np.eye(4)[None], frames, axis=0)
        target = folder / "cameras" / camera
        target.mkdir(parents=True)
        save_npz(target / "frames.npz", {"segmentation": segmentation, "depth_mm": depth_mm,
                                         "extrinsics_cv": extrinsics})
        write_video(target / "rgb.mp4", rgb, FPS)
    save_npz(folder / "data.npz", {"time": np.arange(frames) / FPS})
    meta = {"fps": FPS, "frames": frames, "depth_scale": 1000.0, "segmentation_legend": LEGEND,
            "cameras": {camera: {"width": WIDTH, "height": HEIGHT, "intrinsics": INTRINSICS} for camera in CAMERAS}}
    (folder / "episode.json").write_text(json.dumps(meta))
    return RecordedEpisode.load(folder)


def references() -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(7)
    return {camera: [rng.integers(0, 255, (60, 80, 3), dtype=np.uint8) for _ in range(2)] for camera in CAMERAS}
