"""Read the one episode of a LeRobot v3.0 dataset root from its own files (offline, no torch).

v3.0 layout (lerobot 0.6.1): ``meta/info.json`` (fps, features, path templates), ``meta/episodes/*/*.parquet``
(per episode: its video file and the time span inside it), ``data/*/*.parquet`` (one row per frame) and
``videos/<key>/chunk-XXX/file-YYY.mp4`` (several episodes may share one file, hence the time span).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from datafarm.calibration.errors import CalibrationError
from datafarm.media import VideoError, iter_timed_frames
from datafarm.sim.spaces import DOF

STATE_KEY = "observation.state"


def read_lerobot_episode(root: Path, cameras: dict[str, str]) -> tuple[float, dict[str, np.ndarray], np.ndarray, dict]:
    """(fps, camera name -> (T, H, W, 3) uint8, state (T, 14), meta) of a one-episode dataset."""
    info_file = root / "meta" / "info.json"
    try:
        info = json.loads(info_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CalibrationError(f"{info_file} is not valid JSON ({error}); the dataset is damaged: export the "
                               "calibration episode again (LeRobotDataset.create, save_episode, finalize)") from error
    version = str(info.get("codebase_version", "?"))
    if not version.startswith("v3"):
        raise CalibrationError(f"{info_file}: codebase_version {version}, expected v3.0; convert the dataset with "
                               "lerobot's v2.1 -> v3.0 conversion script first")
    if info.get("total_episodes") != 1:
        raise CalibrationError(f"{info_file}: the dataset has {info.get('total_episodes')} episodes, a calibration "
                               "is exactly one episode; export the one calibration episode into its own dataset")
    features = info.get("features", {})
    for camera, key in cameras.items():
        if key not in features:
            raise CalibrationError(f"{info_file}: camera {camera!r} is missing: no feature {key!r} (expected the "
                                   f"three camera keys {list(cameras.values())}); rename the dataset's image keys")
        if features[key].get("dtype") != "video":
            raise CalibrationError(f"{info_file}: feature {key!r} is stored as {features[key].get('dtype')!r}, "
                                   "expected 'video' (re-record or convert with use_videos=True)")
    state_shape = tuple(features.get(STATE_KEY, {}).get("shape", ()))
    if state_shape != (DOF,):
        raise CalibrationError(f"{info_file}: {STATE_KEY!r} has shape {state_shape or 'missing'}, expected ({DOF},): "
                               "six joints and the gripper opening per arm, left arm first")
    episode = _episode_row(root)
    state = _read_state(root)
    fps = float(info["fps"])
    frames = {}
    for camera, key in cameras.items():
        relative = info["video_path"].format(video_key=key, chunk_index=int(episode[f"videos/{key}/chunk_index"]),
                                             file_index=int(episode[f"videos/{key}/file_index"]))
        frames[camera] = _decode_span(root / relative, float(episode[f"videos/{key}/from_timestamp"]),
                                      float(episode[f"videos/{key}/to_timestamp"]), fps)
    tasks = list(episode.get("tasks") or [])
    meta = {"format": "lerobot", "codebase_version": version, "robot_type": info.get("robot_type"),
            "tasks": tasks, "axis_names": features[STATE_KEY].get("names")}
    return fps, frames, state, meta


def _parquet_files(folder: Path, what: str) -> list[Path]:
    files = sorted(folder.glob("**/*.parquet"))
    if not files:
        raise CalibrationError(f"{folder}: no parquet files ({what}); the dataset is incomplete (was finalize() "
                               "called after the last save_episode()?)")
    return files


def _episode_row(root: Path) -> dict:
    rows = []
    for file in _parquet_files(root / "meta" / "episodes", "episode metadata"):
        try:
            rows.extend(pq.read_table(file).to_pylist())
        except Exception as error:  # pyarrow raises several types for a damaged file
            raise CalibrationError(f"{file} is unreadable ({error}); the dataset is damaged") from error
    if len(rows) != 1:
        raise CalibrationError(f"{root / 'meta' / 'episodes'} lists {len(rows)} episodes, a calibration is exactly "
                               "one episode; export the calibration episode into its own dataset")
    return rows[0]


def _read_state(root: Path) -> np.ndarray:
    states, episodes = [], set()
    for file in _parquet_files(root / "data", "frames"):
        try:
            table = pq.read_table(file, columns=[STATE_KEY, "episode_index", "frame_index"]).to_pydict()
        except Exception as error:
            raise CalibrationError(f"{file} is unreadable or lacks {STATE_KEY!r} ({error}); the dataset is "
                                   "damaged") from error
        order = np.argsort(table["frame_index"], kind="stable")
        states.extend(table[STATE_KEY][i] for i in order)
        episodes.update(table["episode_index"])
    if len(episodes) > 1:
        raise CalibrationError(f"{root / 'data'} holds frames of episodes {sorted(episodes)}; a calibration is "
                               "exactly one episode")
    try:
        return np.asarray(states, dtype=np.float64)
    except ValueError as error:
        raise CalibrationError(f"{root / 'data'}: {STATE_KEY!r} rows have unequal lengths; expected {DOF} values "
                               "per frame") from error


def _decode_span(path: Path, start: float, end: float, fps: float) -> np.ndarray:
    """Frames of `path` whose timestamps lie in [start, end) (half a frame of tolerance)."""
    if not path.is_file():
        raise CalibrationError(f"video {path} is missing; the dataset is incomplete")
    half = 0.5 / fps
    frames = []
    try:
        for time, frame in iter_timed_frames(path):
            if time is None or time < start - half:
                continue
            if time >= end - half:
                break
            frames.append(frame)
    except VideoError as error:
        raise CalibrationError(f"video {path} is unreadable or corrupt ({error}); re-encode or re-record it") from error
    if not frames:
        raise CalibrationError(f"video {path} has no frames between {start:.3f} s and {end:.3f} s")
    return np.stack(frames)
