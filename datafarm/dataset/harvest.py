"""Harvest: write admitted episodes into a LeRobot v3.0 dataset with lerobot's own writer.

Each admitted episode (a `RecordedEpisode` folder plus, optionally, its rendered views) becomes one
LeRobot episode with:

- ``observation.images.cam_high`` / ``cam_left_wrist`` / ``cam_right_wrist``: video, HWC uint8 at the
  episode's resolution (the rendered views when given, else the episode's own sim ``rgb.mp4``);
- ``observation.state`` and ``action``: float32 (14,), named by `AXIS_NAMES`;
- the task string ``task``: the request as the user wrote it (what a language-conditioned policy is
  given at deployment), not a canned paraphrase; the farm keeps its canonical instruction as metadata.

A recovery episode (datafarm.task.recovery) starts at its `demonstration_start`: the frames of the
disturbance before it are not the expert's and are left out; the manifest records the disturbance.

The dataset is written under ``<root>.partial`` and renamed to ``root`` only after ``finalize()``
succeeded, so a crash never leaves a dataset that looks complete. ``root/datafarm_harvest.json``
maps each LeRobot episode index back to the farm's episode index and folder, and holds the
``metadata`` given (the farm's canonical instruction).

Speed: frames go straight to lerobot's streaming encoder (no PNG round trip), encoded with
`WriterSettings` (H.264 ``ultrafast`` by default; see `FASTEST_SETTINGS` and the measurements in
its comment). lerobot's streaming encoder drops frames when its queue stays full for 0.1 s, so its
queue is sized to the longest episode (nothing is ever dropped) and the producer waits while a
camera has `ENCODER_BACKLOG_FRAMES` frames queued (bounded memory); a drop would still be refused.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from datafarm.cameras import CAMERA_KEYS, CAMERAS
from datafarm.errors import BadInput
from datafarm.logs import ffmpeg_kept_quiet, silence_progress_bars
from datafarm.media import VideoError, iter_frames, probe
from datafarm.sim.recorder import RecordedEpisode
from datafarm.sim.spaces import AXIS_NAMES, DOF

log = logging.getLogger(__name__)

ROBOT_TYPE = "agilex_dual_piper"
MANIFEST_NAME = "datafarm_harvest.json"
ENCODER_BACKLOG_FRAMES = 120  # frames per camera waiting for the encoder before the producer waits


class HarvestError(BadInput, ValueError):
    """An episode cannot be harvested as given; the message names the episode and the fix."""


@dataclass(frozen=True)
class HarvestItem:
    """One admitted episode: its recorded sim folder, its rendered views, the farm's episode number."""

    episode_dir: Path
    videos: dict[str, Path] | None = None  # camera name (head, left_wrist, right_wrist) -> mp4
    index: int = 0


@dataclass(frozen=True)
class WriterSettings:
    """Encoding options handed to LeRobotDataset.create (all real lerobot 0.6.1 options)."""

    vcodec: str = "h264"  # lerobot accepts h264, hevc, libsvtav1, libaom-av1, or a hardware codec
    preset: str | int | None = "ultrafast"
    crf: int = 23
    gop: int = 2  # lerobot's default keyframe interval: cheap random access when training
    streaming_encoding: bool = True
    batch_encoding_size: int = 1  # only used when streaming_encoding is False
    encoder_threads: int | None = None  # codec threads per encoder (None: the codec decides)

    def rgb_encoder(self):
        from lerobot.configs.video import RGBEncoderConfig

        return RGBEncoderConfig(vcodec=self.vcodec, preset=self.preset, crf=self.crf, g=self.gop)


# Measured with lerobot 0.6.1 on 2 CPU cores shared with other jobs (load 5-8), 6 episodes x 90 frames
# x 3 cameras at 320x240, recorded seconds per wall second: streaming + H.264 ultrafast 1.6-2.0;
# streaming + libsvtav1 preset 12 1.8 (about the same: lerobot's per-frame image statistics in its
# encoder threads dominate); lerobot's default path (PNG per frame, then encode) 0.53 with either codec.
# batch_encoding_size > 1 fails in lerobot 0.6.1 on a new dataset (meta.episodes is None at the flush).
FASTEST_SETTINGS = WriterSettings()


@dataclass(frozen=True)
class HarvestReport:
    """What one harvest wrote and how fast."""

    root: Path
    repo_id: str
    episodes: int
    frames: int
    wall_seconds: float
    recorded_seconds: float
    episode_map: dict[int, int] = field(default_factory=dict)  # LeRobot episode index -> farm index

    @property
    def recorded_seconds_per_wall_second(self) -> float:
        return self.recorded_seconds / self.wall_seconds if self.wall_seconds > 0 else float("inf")


def dataset_features(resolutions: dict[str, tuple[int, int]]) -> dict[str, dict]:
    """LeRobot feature spec: three cameras (camera name -> (height, width)), 14-D state and action."""
    features: dict[str, dict] = {}
    for camera, key in CAMERA_KEYS.items():
        height, width = resolutions[camera]
        features[key] = {"dtype": "video", "shape": (height, width, 3), "names": ["height", "width", "channels"]}
    for key in ("observation.state", "action"):
        features[key] = {"dtype": "float32", "shape": (DOF,), "names": list(AXIS_NAMES)}
    return features


def _video_paths(item: HarvestItem, episode: RecordedEpisode) -> dict[str, Path]:
    paths = {}
    for camera in CAMERAS:
        if item.videos is not None:
            if camera not in item.videos:
                raise HarvestError(f"episode {item.index} ({item.episode_dir}): no rendered video for camera "
                                   f"{camera!r}; give one mp4 per camera {list(CAMERAS)}")
            paths[camera] = Path(item.videos[camera])
        else:
            if camera not in episode.cameras:
                raise HarvestError(f"episode {item.index} ({item.episode_dir}) has no sim camera {camera!r} "
                                   f"(it has {episode.cameras}); record it with all three cameras or pass videos")
            paths[camera] = episode.directory / "cameras" / camera / "rgb.mp4"
        if not paths[camera].is_file():
            raise HarvestError(f"episode {item.index}: video {paths[camera]} does not exist")
    return paths


def _probe_video(path: Path) -> tuple[int, int]:
    """(height, width) of a video's first stream; HarvestError if it cannot be opened."""
    try:
        info = probe(path)
    except VideoError as error:
        raise HarvestError(f"{error}; re-render or re-record the episode") from error
    return info.height, info.width


def _iter_frames(path: Path) -> Iterator[np.ndarray]:
    """Decode a video frame by frame as (H, W, 3) uint8 (constant memory)."""
    try:
        yield from iter_frames(path)
    except VideoError as error:
        raise HarvestError(f"{error}; re-render or re-record the episode") from error


@dataclass
class _Prepared:
    item: HarvestItem
    state: np.ndarray
    action: np.ndarray
    videos: dict[str, Path]
    resolutions: dict[str, tuple[int, int]]
    first_frame: int = 0  # a recovery episode's demonstration_start: the recorded frames before it are skipped
    recovery: dict | None = None


def _prepare(item: HarvestItem, fps: int) -> _Prepared:
    """Load and check one item's arrays and videos before anything is written."""
    try:
        episode = RecordedEpisode.load(item.episode_dir)
    except FileNotFoundError as error:
        raise HarvestError(f"episode {item.index}: {error}") from error
    if round(float(episode.meta["fps"])) != fps:
        raise HarvestError(f"episode {item.index} ({item.episode_dir}) was recorded at {episode.meta['fps']} fps, "
                           f"the dataset is {fps} fps; harvest episodes of one rate together")
    data = episode.data()
    state, action = data["state"].astype(np.float32), data["action"].astype(np.float32)
    if state.shape != action.shape or state.ndim != 2 or state.shape[1] != DOF or len(state) == 0:
        raise HarvestError(f"episode {item.index} ({item.episode_dir / 'data.npz'}): state {state.shape} and action "
                           f"{action.shape} must both be (T, {DOF}) with T > 0")
    recovery = episode.meta.get("recovery")
    first = int(recovery["demonstration_start"]) if recovery else 0
    if not 0 <= first < len(state):
        raise HarvestError(f"episode {item.index} ({item.episode_dir / 'episode.json'}): its demonstration starts at "
                           f"frame {first} of {len(state)}; record the episode again")
    videos = _video_paths(item, episode)
    return _Prepared(item, state[first:], action[first:], videos,
                     {camera: _probe_video(path) for camera, path in videos.items()}, first, recovery)


def _write_episode(dataset, prepared: _Prepared, task: str) -> int:
    """add_frame every frame of one episode, then save_episode; returns the frame count."""
    item, rows = prepared.item, len(prepared.state)
    streams = {camera: _iter_frames(path) for camera, path in prepared.videos.items()}
    try:
        for stream in streams.values():
            for _ in range(prepared.first_frame):
                next(stream, None)  # the disturbance's frames: the recorded episode keeps them, the dataset does not
        for t in range(rows):
            frame: dict = {"observation.state": prepared.state[t], "action": prepared.action[t], "task": task}
            for camera, stream in streams.items():
                image = next(stream, None)
                if image is None:
                    raise HarvestError(f"episode {item.index}: video {prepared.videos[camera]} has "
                                       f"{prepared.first_frame + t} frames but the episode has "
                                       f"{prepared.first_frame + rows} rows; re-render it at the episode's frame count")
                frame[CAMERA_KEYS[camera]] = image
            _wait_for_encoder_backlog(dataset)
            dataset.add_frame(frame)
        for camera, stream in streams.items():
            if next(stream, None) is not None:
                raise HarvestError(f"episode {item.index}: video {prepared.videos[camera]} has more frames than "
                                   f"the episode's {rows} rows; re-render it at the episode's frame count")
    except BaseException:
        dataset.clear_episode_buffer()
        raise
    finally:
        for stream in streams.values():
            stream.close()
    dataset.save_episode()
    _check_no_dropped_frames(dataset, item)
    return rows


def _resolutions_of(dataset: Path) -> dict[str, tuple[int, int]]:
    """(height, width) per camera of a dataset `harvest` wrote, from its info.json."""
    features = json.loads((Path(dataset) / "meta" / "info.json").read_text())["features"]
    return {camera: tuple(features[key]["shape"][:2]) for camera, key in CAMERA_KEYS.items()}


def _wait_for_encoder_backlog(dataset, limit: int = ENCODER_BACKLOG_FRAMES) -> None:
    """Hold the producer while any camera's streaming-encoder queue holds `limit` frames or more.

    Frames come from files far faster than they encode; the queue is sized to a whole episode so none
    is ever dropped, and this keeps memory to about `limit` frames per camera. Reads lerobot 0.6.1's
    private queues when they exist (without them it is a no-op and the large queue still holds)."""
    encoder = getattr(getattr(dataset, "writer", None), "_streaming_encoder", None)
    queues = getattr(encoder, "_frame_queues", None)
    threads = getattr(encoder, "_threads", None)
    if not queues or not threads:
        return
    while max(q.qsize() for q in queues.values()) >= limit:
        if not all(thread.is_alive() for thread in threads.values()):
            return  # a crashed encoder: add_frame reports lerobot's error
        time.sleep(0.002)


def _check_no_dropped_frames(dataset, item: HarvestItem) -> None:
    """lerobot's streaming encoder drops frames when its queue stays full; refuse such an episode.

    Reads a private counter of lerobot 0.6.1's StreamingVideoEncoder when it exists (the queue is sized
    so that this never happens; this is the guard)."""
    encoder = getattr(getattr(dataset, "writer", None), "_streaming_encoder", None)
    dropped = {k: v for k, v in (getattr(encoder, "_dropped_frames", None) or {}).items() if v}
    if dropped:
        raise HarvestError(f"episode {item.index}: lerobot's streaming encoder dropped frames {dropped}; "
                           "harvest again with a larger encoder queue or streaming_encoding=False")


def extendable(dataset: Path, repo_id: str, fps: int, task: str, metadata: dict | None = None) -> list[int]:
    """The farm indices of the episodes in `dataset`, a dataset `harvest` wrote with these same settings
    (so `harvest(..., extend=dataset)` may append to it); [] when there is none or anything differs."""
    try:
        manifest = json.loads((Path(dataset) / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return []
    wanted = {"repo_id": repo_id, "fps": fps, "task": task, **(metadata or {})}
    if {key: manifest.get(key) for key in wanted} != wanted or set(manifest) - set(wanted) != {"episodes"}:
        return []
    return [episode["farm_index"] for episode in manifest["episodes"]]


def harvest(items: list[HarvestItem], root: Path, repo_id: str, fps: int, task: str,
            progress: Callable[[int, int], None] | None = None,
            settings: WriterSettings = FASTEST_SETTINGS, metadata: dict | None = None,
            extend: Path | None = None) -> HarvestReport:
    """Write `items` (in order) as one LeRobot v3.0 dataset at `root`; returns what was written.

    `task` is every frame's LeRobot task string; `metadata` (e.g. the canonical instruction) goes
    into the dataset's datafarm_harvest.json. Every item is checked (arrays, cameras, resolutions,
    fps) before the first frame is written. `root` must not exist. `progress(done, total)` is called
    after each episode. With `extend` (a dataset `extendable` accepts), `root` is that dataset followed by
    `items`: its files are copied and lerobot appends to them (LeRobotDataset.resume), so only the new
    episodes are encoded; `extend` itself is left as it was."""
    root = Path(root)
    if not items:
        raise HarvestError("nothing to harvest: no admitted episodes were given")
    kept = extendable(extend, repo_id, fps, task, metadata) if extend is not None else []
    if extend is not None and not kept:
        raise HarvestError(f"{extend} is not a dataset harvested with these settings (repo id, fps, task, "
                           "metadata); harvest every episode afresh instead")
    if root.exists():
        raise HarvestError(f"dataset folder {root} already exists; remove it or choose another root")
    if not task.strip():
        raise HarvestError("the task string is empty; every LeRobot frame needs one: write the request in words")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset  # heavy (torch, ~8 s once): not timed

    silence_progress_bars()  # datasets' `Map:` bars while lerobot writes and finalizes
    started = time.perf_counter()
    prepared = [_prepare(item, fps) for item in items]
    resolutions = prepared[0].resolutions
    for other in prepared[1:]:
        if other.resolutions != resolutions:
            raise HarvestError(f"episode {other.item.index} has camera sizes {other.resolutions}, episode "
                               f"{prepared[0].item.index} has {resolutions}; one dataset holds one size per camera")
    if kept and _resolutions_of(extend) != resolutions:
        raise HarvestError(f"{extend} holds camera sizes {_resolutions_of(extend)}, the new episodes {resolutions}; "
                           "harvest every episode afresh instead")
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)

    # lerobot hands FFmpeg the terminal back from its encoder threads: keep it quiet throughout
    with ffmpeg_kept_quiet():
        longest = max(len(p.state) for p in prepared)
        options = dict(repo_id=repo_id, root=staging, rgb_encoder=settings.rgb_encoder(),
                       encoder_threads=settings.encoder_threads, streaming_encoding=settings.streaming_encoding,
                       encoder_queue_maxsize=longest + 1,
                       batch_encoding_size=1 if settings.streaming_encoding else settings.batch_encoding_size)
        if kept:
            shutil.copytree(extend, staging)
            dataset = LeRobotDataset.resume(**options)
        else:
            dataset = LeRobotDataset.create(fps=fps, features=dataset_features(resolutions), robot_type=ROBOT_TYPE,
                                            use_videos=True, **options)
        frames, episode_map = 0, {}
        try:
            for number, episode in enumerate(prepared, start=len(kept)):
                frames += _write_episode(dataset, episode, task)
                episode_map[number] = episode.item.index
                log.debug("harvested episode %d (farm %d): %d frames", number, episode.item.index,
                          len(episode.state))
                if progress:
                    progress(number + 1 - len(kept), len(prepared))
            dataset.finalize()  # mandatory: writes the parquet footers and flushes pending videos
        except BaseException:
            try:
                dataset.finalize()  # stops lerobot's encoder threads and writers before the staging folder goes
            except Exception:  # the first error is the one to report
                log.debug("finalize after a failed harvest also failed", exc_info=True)
            shutil.rmtree(staging, ignore_errors=True)
            raise
    previous = json.loads((extend / MANIFEST_NAME).read_text())["episodes"] if kept else []
    manifest = {"repo_id": repo_id, "fps": fps, "task": task, **(metadata or {}),
                "episodes": previous + [{"lerobot_episode": n, "farm_index": p.item.index,
                                         "episode_dir": str(p.item.episode_dir), "rendered": p.item.videos is not None,
                                         **({"recovery": p.recovery} if p.recovery else {})}
                                        for n, p in enumerate(prepared, start=len(kept))]}
    (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    staging.rename(root)
    wall = time.perf_counter() - started
    report = HarvestReport(root, repo_id, len(prepared), frames, wall, frames / fps, episode_map)
    log.debug("harvest wrote %d episodes, %d frames to %s in %.1f s (%.2f recorded s per wall s)",
             report.episodes, frames, root, wall, report.recorded_seconds_per_wall_second)
    return report
