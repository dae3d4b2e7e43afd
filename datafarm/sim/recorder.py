"""Record rig episodes at the control rate, to a documented on-disk layout.

Layout of one episode folder (written under a temporary name, renamed when complete)::

    episode.json                  metadata: fps, axis names, cameras (intrinsics, mount, size),
                                  segmentation legend (id -> entity name), frame count, extra info
    data.npz                      time (T,) s; state (T, 14); action (T, 14); velocity (T, 14);
                                  clipped (T, 14) bool: the action was clipped to a joint limit
    cameras/<name>/rgb.mp4        H.264 RGB at the control rate
    cameras/<name>/frames.npz     depth_mm (T, H, W) uint16 (0: no hit); segmentation (T, H, W)
                                  uint16 entity ids; extrinsics_cv (T, 4, 4) world -> camera (OpenCV)

Frame t holds the observation taken before action t was applied (LeRobot's convention).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from datafarm.media import VideoWriter, read_video
from datafarm.sim.rig import DualArmRig, StepReport
from datafarm.sim.spaces import AXIS_NAMES

LAYOUT_VERSION = 1
DEPTH_SCALE = 1000.0  # stored depth units per metre
_MAX_DEPTH_MM = np.iinfo(np.uint16).max


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like np.savez_compressed, at zlib level 1: about as small for depth and ids, several times faster."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


class EpisodeRecorder:
    """Steps the rig with actions and records every camera and the joint state. Context manager."""

    def __init__(self, rig: DualArmRig, directory: str | Path, cameras: list[str] | None = None,
                 metadata: dict | None = None):
        self.rig = rig
        self.directory = Path(directory)
        self.cameras = list(rig.cameras) if cameras is None else list(cameras)
        self.metadata = dict(metadata or {})
        self._staging = self.directory.with_name(self.directory.name + ".partial")
        self._writers: dict[str, VideoWriter] = {}
        self._rows: dict[str, list] = {"time": [], "state": [], "action": [], "velocity": [], "clipped": []}
        self._frames: dict[str, dict[str, list]] = {}

    def __enter__(self) -> EpisodeRecorder:
        if self._staging.exists():
            shutil.rmtree(self._staging)
        for name in self.cameras:
            folder = self._staging / "cameras" / name
            folder.mkdir(parents=True)
            self._writers[name] = VideoWriter(folder / "rgb.mp4", self.rig.config.timing.control_hz).__enter__()
            self._frames[name] = {"depth_mm": [], "segmentation": [], "extrinsics_cv": []}
        return self

    @property
    def frame_count(self) -> int:
        return len(self._rows["time"])

    def record(self, action) -> StepReport:
        """Observe (cameras, state), then apply `action` for one control period."""
        frames = self.rig.capture(self.cameras)
        time, state, velocity = self.rig.time, self.rig.qpos(), self.rig.qvel()
        report = self.rig.step(action)
        for name, frame in frames.items():
            self._writers[name].write(frame.rgb)
            depth = np.clip(frame.depth * DEPTH_SCALE, 0, _MAX_DEPTH_MM).round().astype(np.uint16)
            self._frames[name]["depth_mm"].append(depth)
            self._frames[name]["segmentation"].append(frame.segmentation.astype(np.uint16))
            self._frames[name]["extrinsics_cv"].append(frame.extrinsic_cv)
        self._rows["time"].append(time)
        self._rows["state"].append(state)
        self._rows["action"].append(report.target)
        self._rows["velocity"].append(velocity)
        self._rows["clipped"].append(np.isin(AXIS_NAMES, report.clipped))
        return report

    def __exit__(self, exc_type, exc, tb) -> None:
        for writer in self._writers.values():
            writer.__exit__(None, None, None)
        if exc_type is not None or self.frame_count == 0:
            shutil.rmtree(self._staging, ignore_errors=True)  # nothing half-written is left behind
            return
        self._finish()

    def _finish(self) -> None:
        save_npz(self._staging / "data.npz", {k: np.asarray(v) for k, v in self._rows.items()})
        for name, arrays in self._frames.items():
            save_npz(self._staging / "cameras" / name / "frames.npz", {k: np.stack(v) for k, v in arrays.items()})
        specs = self.rig.config.cameras
        meta = {
            "layout_version": LAYOUT_VERSION,
            "fps": self.rig.config.timing.control_hz,
            "sim_hz": self.rig.config.timing.sim_hz,
            "frames": self.frame_count,
            "axis_names": list(AXIS_NAMES),
            "depth_scale": DEPTH_SCALE,
            "cameras": {
                name: {"width": specs[name].width, "height": specs[name].height, "mount": specs[name].mount,
                       "fovy_deg": specs[name].fovy_deg, "intrinsics": self.rig.intrinsics(name).tolist()}
                for name in self.cameras
            },
            "segmentation_legend": {str(k): v for k, v in self.rig.segmentation_legend().items()},
            **self.metadata,
        }
        (self._staging / "episode.json").write_text(json.dumps(meta, indent=2))
        if self.directory.exists():
            shutil.rmtree(self.directory)
        self._staging.rename(self.directory)


@dataclass
class RecordedEpisode:
    """A recorded episode on disk; arrays load on demand."""

    directory: Path
    meta: dict

    @classmethod
    def load(cls, directory: str | Path) -> RecordedEpisode:
        directory = Path(directory)
        meta_path = directory / "episode.json"
        if not meta_path.exists():
            raise FileNotFoundError(f"{directory} is not a recorded episode: {meta_path.name} is missing")
        return cls(directory, json.loads(meta_path.read_text()))

    @property
    def cameras(self) -> list[str]:
        return list(self.meta["cameras"])

    def data(self) -> dict[str, np.ndarray]:
        with np.load(self.directory / "data.npz") as data:
            return {k: data[k] for k in data.files}

    def rgb(self, camera: str) -> np.ndarray:
        return read_video(self._camera_dir(camera) / "rgb.mp4")

    def frames(self, camera: str) -> dict[str, np.ndarray]:
        """depth (T, H, W) float32 metres, segmentation (T, H, W) int32, extrinsics_cv (T, 4, 4)."""
        with np.load(self._camera_dir(camera) / "frames.npz") as data:
            return {
                "depth": data["depth_mm"].astype(np.float32) / self.meta["depth_scale"],
                "segmentation": data["segmentation"].astype(np.int32),
                "extrinsics_cv": data["extrinsics_cv"],
            }

    def _camera_dir(self, camera: str) -> Path:
        if camera not in self.meta["cameras"]:
            raise KeyError(f"episode {self.directory} has no camera {camera!r}; it has {self.cameras}")
        return self.directory / "cameras" / camera
