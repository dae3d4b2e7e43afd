"""The calibration episode: ONE recording of the real rig in the target scene, validated on the way in.

Two input formats are accepted by `load_calibration`:

(a) a LeRobot v3.0 dataset root with exactly one episode, the three camera keys of `CAMERA_KEYS` as
    videos and a 14-D ``observation.state`` (read from its parquet and mp4 files directly: offline,
    no torch);
(b) a folder with three mp4s (``head.mp4``, ``left_wrist.mp4``, ``right_wrist.mp4``, or LeRobot's
    names ``cam_high.mp4``, ``cam_left_wrist.mp4``, ``cam_right_wrist.mp4``) and a joint-state table
    ``joints.csv`` (a header, then 14 columns named like `AXIS_NAMES` or any 14 numeric columns) or
    ``joints.parquet``.

(c) a one-frame, head-only folder written from a single photo (``head.png`` + ``joints.csv`` at the
    assumed rest pose; `datafarm.calibration.photo`): wrist cameras absent, joints not measured.

Any of them may carry ``datafarm_calibration.json`` (provenance; ``{"synthetic": true}`` marks a recording
made in simulation). Every problem raises `CalibrationError` naming the file, what was expected and
how to fix it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from datafarm.calibration.errors import CalibrationError
from datafarm.calibration.joints import read_joint_table
from datafarm.calibration.photo import is_photo_folder, read_photo_folder
from datafarm.cameras import CAMERA_KEYS
from datafarm.media import VideoError, probe, read_video
from datafarm.sim.spaces import AXIS_NAMES, DOF

log = logging.getLogger(__name__)

# File names accepted for each camera in a folder (format b).
FOLDER_VIDEO_NAMES: dict[str, tuple[str, ...]] = {camera: (f"{camera}.mp4", f"{key.rsplit('.', 1)[1]}.mp4")
                                                  for camera, key in CAMERA_KEYS.items()}
PROVENANCE_FILE = "datafarm_calibration.json"
_PLATE_SAMPLES = 30
JOINT_MAX_RAD = 2 * np.pi  # beyond a full turn either way a joint value is in degrees


@dataclass
class CalibrationEpisode:
    """A validated calibration recording held in memory."""

    source: Path
    fps: float
    frames: dict[str, np.ndarray]  # camera name -> (T, H, W, 3) uint8
    state: np.ndarray  # (T, 14) joint state, named by AXIS_NAMES
    synthetic: bool
    meta: dict = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return len(self.state)

    @property
    def cameras(self) -> list[str]:
        return list(self.frames)

    def keyframe_indices(self, count: int = 3) -> list[int]:
        """`count` evenly spaced frame indices from the first to the last frame."""
        if count < 1:
            raise ValueError(f"keyframe count must be at least 1, got {count}")
        return sorted({int(i) for i in np.linspace(0, self.num_frames - 1, count).round()})

    def keyframes(self, count: int = 3) -> dict[str, list[np.ndarray]]:
        """Evenly spaced frames of every camera (fewer than `count` if the episode is shorter)."""
        indices = self.keyframe_indices(count)
        return {camera: [frames[i] for i in indices] for camera, frames in self.frames.items()}

    def background_plate(self, camera: str, samples: int = _PLATE_SAMPLES) -> np.ndarray:
        """Per-pixel temporal median over up to `samples` evenly spaced frames: (H, W, 3) uint8.

        On a static camera this removes whatever moves (the arms) and keeps the table and the room."""
        if camera not in self.frames:
            raise KeyError(f"no camera {camera!r}; the calibration has {self.cameras}")
        indices = np.unique(np.linspace(0, self.num_frames - 1, min(samples, self.num_frames)).round().astype(int))
        return np.median(self.frames[camera][indices], axis=0).round().astype(np.uint8)


def load_calibration(path: str | Path) -> CalibrationEpisode:
    """Read and validate a calibration episode in format (a) or (b) (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise CalibrationError(f"calibration {path} does not exist; pass a LeRobot dataset root or a folder "
                               "with head/left_wrist/right_wrist mp4s and joints.csv")
    if not path.is_dir():
        raise CalibrationError(f"calibration {path} is a file; pass the folder holding it (a LeRobot dataset root "
                               "or a folder with head.mp4, left_wrist.mp4, right_wrist.mp4 and joints.csv)")
    provenance = _read_provenance(path)
    if (path / "meta" / "info.json").exists():
        from datafarm.calibration.lerobot_input import read_lerobot_episode

        fps, frames, state, meta = read_lerobot_episode(path, CAMERA_KEYS)
    elif is_photo_folder(path):
        fps, frames, state, meta = read_photo_folder(path)
    else:
        fps, frames, state, meta = _read_folder(path)
    _check_shapes(path, frames, state)
    meta = {**meta, **provenance}
    episode = CalibrationEpisode(path, fps, frames, state, bool(provenance.get("synthetic", False)), meta)
    log.info("calibration %s: %d frames at %.1f fps, cameras %s, synthetic=%s", path, episode.num_frames, fps,
             {c: f[0].shape[:2] for c, f in frames.items()}, episode.synthetic)
    return episode


def _read_provenance(path: Path) -> dict:
    file = path / PROVENANCE_FILE
    if not file.exists():
        return {}
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as error:
        raise CalibrationError(f"{file} is not valid JSON ({error}); fix or delete it") from error
    if not isinstance(data, dict):
        raise CalibrationError(f"{file} must hold a JSON object like {{\"synthetic\": false}}")
    return data


def read_video_checked(path: Path) -> np.ndarray:
    """All frames of `path`, or CalibrationError saying it is unreadable."""
    try:
        return read_video(path)
    except ValueError as error:
        raise CalibrationError(f"{path} is unreadable or corrupt ({error}); re-export it as an H.264 mp4 "
                               "(e.g. ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4)") from error


def video_fps(path: Path) -> float:
    try:
        rate = probe(path).fps
    except VideoError as error:
        raise CalibrationError(f"{path} is unreadable or corrupt ({error}); re-export it as an H.264 mp4") from error
    return float(rate) if rate else 30.0


def _find_video(folder: Path, camera: str) -> Path:
    names = FOLDER_VIDEO_NAMES[camera]
    present = [folder / name for name in names if (folder / name).exists()]
    if not present:
        raise CalibrationError(f"{folder}: camera {camera!r} is missing; expected {' or '.join(names)} "
                               f"(one video per camera: {[n[0] for n in FOLDER_VIDEO_NAMES.values()]})")
    if len(present) > 1:
        raise CalibrationError(f"{folder}: both {present[0].name} and {present[1].name} exist for camera "
                               f"{camera!r}; keep one of them")
    return present[0]


def _read_folder(folder: Path) -> tuple[float, dict[str, np.ndarray], np.ndarray, dict]:
    videos = {camera: _find_video(folder, camera) for camera in CAMERA_KEYS}
    tables = [folder / name for name in ("joints.csv", "joints.parquet") if (folder / name).exists()]
    if not tables:
        raise CalibrationError(f"{folder}: joint states are missing; expected joints.csv (a header, then one "
                               f"row per video frame with {DOF} columns) or joints.parquet")
    if len(tables) > 1:
        raise CalibrationError(f"{folder}: both joints.csv and joints.parquet exist; keep one of them")
    frames = {camera: read_video_checked(path) for camera, path in videos.items()}
    rates = {camera: video_fps(path) for camera, path in videos.items()}
    if len({round(rate, 3) for rate in rates.values()}) > 1:
        raise CalibrationError(f"{folder}: the cameras have different frame rates {rates}; re-export them "
                               "at one rate")
    state = read_joint_table(tables[0])
    meta = {"format": "folder", "videos": {c: p.name for c, p in videos.items()}, "joints": tables[0].name}
    return rates["head"], frames, state, meta


def _check_shapes(path: Path, frames: dict[str, np.ndarray], state: np.ndarray) -> None:
    counts = {camera: len(f) for camera, f in frames.items()}
    if len(set(counts.values())) != 1:
        raise CalibrationError(f"{path}: the cameras have unequal frame counts {counts}; the three streams must "
                               "be synchronized, one frame per camera per time step (trim them to the shortest)")
    for camera, f in frames.items():
        if f.ndim != 4 or f.shape[3] != 3 or f.dtype != np.uint8:
            raise CalibrationError(f"{path}: camera {camera!r} frames are {f.shape} {f.dtype}, expected "
                                   "(T, H, W, 3) uint8 RGB")
    if state.ndim != 2 or state.shape[1] != DOF:
        raise CalibrationError(f"{path}: the joint state has shape {state.shape}, expected (T, {DOF}): six joints "
                               "and the gripper opening per arm, left arm first")
    count = next(iter(counts.values()))
    if len(state) != count:
        raise CalibrationError(f"{path}: the joint state has {len(state)} rows but the videos have {count} frames; "
                               "record one joint-state row per video frame (resample the joints to the video rate)")
    if not np.all(np.isfinite(state)):
        rows = np.flatnonzero(~np.all(np.isfinite(state), axis=1))[:5].tolist()
        raise CalibrationError(f"{path}: the joint state has missing or non-finite values at rows {rows}; re-export "
                               "the joint log, or fill the gaps (interpolate between the neighbouring rows)")
    _check_units(path, state)


def _check_units(path: Path, state: np.ndarray) -> None:
    """Joints in rad: a value beyond a full turn means degrees (every PiPER joint turns less than that)."""
    for axis, name in enumerate(AXIS_NAMES):
        worst = int(np.argmax(np.abs(state[:, axis])))
        if not name.endswith("gripper") and abs(state[worst, axis]) > JOINT_MAX_RAD:
            raise CalibrationError(f"{path}: {name} is {state[worst, axis]:.4g} at row {worst}, out of range for "
                                   "radians (was it recorded in degrees?); convert degrees to radians (multiply "
                                   "by pi/180): joints are in radians, gripper openings in metres")
