"""Derived training datasets: the delivery, resized and reduced to some cameras, frames decoded once.

ACT has no resize option, and decoding a 640x480 video frame per sample dominates a CPU training step.
So training at reduced resolution reads a *derived* LeRobot dataset written beside the delivery,
``WS/derived/<h>x<w>-<cameras>/`` (``<camera>-<h>x<w>+...`` when the cameras' sizes differ), with
lerobot's own writer and *image* features (small PNGs in parquet, no video), plus a frame store of the
decoded frames (:mod:`datafarm.policy.frame_store`): the videos are decoded once, here, and a training
step decodes no image. The derived dataset records the SHA-256 of the delivery's ``manifest.json``; a
new delivery (a different manifest) rebuilds it, an unchanged one reuses it.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from datafarm.errors import BadInput
from datafarm.policy.frame_store import build_frame_store, has_frame_store
from datafarm.policy.spec import ACTION_KEY, CAMERA_KEYS, STATE_KEY, downscale
from datafarm.workspace import sha256_file

log = logging.getLogger(__name__)

DELIVERY_DATASET = "dataset"
DELIVERY_MANIFEST = "manifest.json"
HARVEST_MAP = "datafarm_harvest.json"  # written by datafarm.dataset.harvest: LeRobot episode -> farm episode
DERIVED_DIR = "derived"
STAMP_FILE = "datafarm_derived.json"
DECODE_CHUNK = 32  # frames decoded per call (bounded memory at full resolution)


@dataclass(frozen=True)
class TrainingData:
    """A LeRobot dataset to train on and what it was made from."""

    root: Path
    repo_id: str
    cameras: list[str]
    image_sizes: dict[str, tuple[int, int]]  # each camera's (height, width) in `root`
    manifest_sha256: str
    fps: int
    derived: bool
    built_seconds: float = 0.0  # 0 when an existing derived dataset was reused


def manifest_sha256(workspace_root: Path) -> str:
    path = Path(workspace_root) / DELIVERY_MANIFEST
    if not path.is_file() or not (Path(workspace_root) / DELIVERY_DATASET / "meta" / "info.json").is_file():
        raise BadInput(f"{workspace_root} has no delivered dataset ({DELIVERY_MANIFEST} and {DELIVERY_DATASET}/ are "
                       f"written by the harvest phase): run `datafarm farm {workspace_root}` first")
    return sha256_file(path)


Sizes = dict[str, "tuple[int, int] | None"]  # camera -> (height, width); None: as delivered


def derived_folder(workspace_root: Path, sizes: Sizes) -> Path:
    """``96x128-head`` when every camera has one size, else ``head-96x128+left_wrist-48x64``."""
    def label(size):
        return "full" if size is None else f"{size[0]}x{size[1]}"

    if len({label(size) for size in sizes.values()}) == 1:
        name = f"{label(next(iter(sizes.values())))}-{'+'.join(sizes)}"
    else:
        name = "+".join(f"{camera}-{label(size)}" for camera, size in sizes.items())
    return Path(workspace_root) / DERIVED_DIR / name


def delivered_data(workspace_root: Path) -> TrainingData:
    """The delivered dataset itself (all cameras, video, full resolution)."""
    root = Path(workspace_root) / DELIVERY_DATASET
    sha = manifest_sha256(workspace_root)
    info = json.loads((root / "meta" / "info.json").read_text())
    sizes = {c: _feature_size(info["features"][key]) for c, key in CAMERA_KEYS.items()}
    return TrainingData(root, _repo_id(workspace_root, "dataset"), list(CAMERA_KEYS), sizes, sha, int(info["fps"]),
                        derived=False)


def _feature_size(feature: dict) -> tuple[int, int]:
    return int(feature["shape"][0]), int(feature["shape"][1])


def derived_data(workspace_root: Path, sizes: Sizes) -> TrainingData:
    """The derived dataset of these cameras at these sizes: reused while its stamp matches the delivery."""
    workspace_root = Path(workspace_root)
    sha = manifest_sha256(workspace_root)
    folder = derived_folder(workspace_root, sizes)
    cameras = list(sizes)
    camera_keys = [CAMERA_KEYS[c] for c in cameras]
    wanted = {"manifest_sha256": sha, "cameras": cameras,
              "image_sizes": {c: None if size is None else list(size) for c, size in sizes.items()}}
    stamp = folder / STAMP_FILE
    if stamp.is_file():
        recorded = json.loads(stamp.read_text())
        if {key: recorded.get(key) for key in wanted} == wanted:
            if not has_frame_store(folder, camera_keys):  # derived before frame stores existed
                build_frame_store(folder, camera_keys)
            log.info("reusing derived dataset %s (delivery manifest %s)", folder, sha[:12])
            return _training_data(workspace_root, folder, recorded, built_seconds=0.0)
        log.info("derived dataset %s was made from another delivery (manifest %s, now %s): rebuilding",
                 folder, str(recorded.get("manifest_sha256"))[:12], sha[:12])
    started = time.perf_counter()
    recorded = _build(workspace_root, folder, sizes, wanted)
    return _training_data(workspace_root, folder, recorded, built_seconds=time.perf_counter() - started)


def _repo_id(workspace_root: Path, name: str) -> str:
    # lerobot wants an "owner/name" id even for a local root; nothing is ever fetched with it.
    return f"datafarm/{Path(workspace_root).resolve().name}-{name}"


def _training_data(workspace_root: Path, folder: Path, recorded: dict, built_seconds: float) -> TrainingData:
    return TrainingData(folder, _repo_id(workspace_root, folder.name), recorded["cameras"],
                        {c: tuple(size) for c, size in recorded["frame_sizes"].items()}, recorded["manifest_sha256"],
                        recorded["fps"], derived=True, built_seconds=built_seconds)


def _build(workspace_root: Path, folder: Path, sizes: Sizes, wanted: dict) -> dict:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.datasets.video_utils import decode_video_frames

    source_root = workspace_root / DELIVERY_DATASET
    source = LeRobotDataset(_repo_id(workspace_root, "dataset"), root=source_root)
    meta = source.meta
    cameras = list(sizes)
    missing = [c for c in cameras if CAMERA_KEYS[c] not in meta.features]
    if missing:
        raise BadInput(f"the delivered dataset {source_root} has no camera {missing}; it has {meta.camera_keys}")
    size = {c: tuple(sizes[c]) if sizes[c] is not None else _feature_size(meta.features[CAMERA_KEYS[c]])
            for c in cameras}
    features = {CAMERA_KEYS[c]: {"dtype": "image", "shape": (*size[c], 3), "names": ["height", "width", "channels"]}
                for c in cameras}
    for key in (STATE_KEY, ACTION_KEY):
        features[key] = {k: v for k, v in meta.features[key].items() if k in ("dtype", "shape", "names")}
    tasks = _task_strings(meta)
    columns = source.hf_dataset.select_columns(["episode_index", "task_index", STATE_KEY, ACTION_KEY])
    columns = columns.with_format("numpy")
    episode_of_row, task_of_row = np.asarray(columns["episode_index"]), np.asarray(columns["task_index"])
    states = np.asarray(columns[STATE_KEY], dtype=np.float32)
    actions = np.asarray(columns[ACTION_KEY], dtype=np.float32)

    if folder.exists():
        shutil.rmtree(folder)
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    target = LeRobotDataset.create(repo_id=_repo_id(workspace_root, folder.name), fps=meta.fps, features=features,
                                   root=staging, robot_type=meta.robot_type, use_videos=False)
    frames = 0
    try:
        for episode in range(meta.total_episodes):
            rows = np.flatnonzero(episode_of_row == episode)
            info = meta.episodes[episode]
            times = [float(t) / meta.fps for t in range(len(rows))]
            images = {c: _decode_episode(decode_video_frames,
                                         source_root / meta.get_video_file_path(episode, CAMERA_KEYS[c]),
                                         info[f"videos/{CAMERA_KEYS[c]}/from_timestamp"], times, size[c])
                      for c in cameras}
            for t, row in enumerate(rows):
                frame = {STATE_KEY: states[row], ACTION_KEY: actions[row], "task": tasks[int(task_of_row[row])]}
                frame.update({CAMERA_KEYS[c]: images[c][t] for c in cameras})
                target.add_frame(frame)
            target.save_episode()
            frames += len(rows)
            log.info("derived episode %d/%d (%d frames) into %s", episode + 1, meta.total_episodes, len(rows), folder)
        target.finalize()
    except BaseException:
        try:
            target.finalize()
        except Exception:  # the first error is the one to report
            log.debug("finalize after a failed derivation also failed", exc_info=True)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if (source_root / HARVEST_MAP).is_file():
        shutil.copy2(source_root / HARVEST_MAP, staging / HARVEST_MAP)
    recorded = {**wanted, "frame_sizes": {c: list(size[c]) for c in cameras}, "fps": int(meta.fps),
                "episodes": int(meta.total_episodes), "frames": frames, "source": str(source_root)}
    build_frame_store(staging, [CAMERA_KEYS[c] for c in cameras])
    (staging / STAMP_FILE).write_text(json.dumps(recorded, indent=2))
    staging.rename(folder)
    return recorded


def _decode_episode(decode, video: Path, start: float, times: list[float], size: tuple[int, int]) -> np.ndarray:
    """Every frame of one episode's segment of a video file, resized: (T, h, w, 3) uint8."""
    out = np.empty((len(times), size[0], size[1], 3), dtype=np.uint8)
    for first in range(0, len(times), DECODE_CHUNK):
        chunk = [start + t for t in times[first:first + DECODE_CHUNK]]
        decoded = decode(video, chunk, 1e-4, backend="pyav", return_uint8=True)  # (n, 3, H, W) uint8
        for offset, frame in enumerate(decoded.numpy().transpose(0, 2, 3, 1)):
            out[first + offset] = downscale(np.ascontiguousarray(frame), size)
    return out


def _task_strings(meta) -> dict[int, str]:
    """task_index -> the task string, from lerobot's own task table."""
    return {int(index): str(task) for task, index in zip(meta.tasks.index, meta.tasks["task_index"])}


def training_episode_seeds(workspace_root: Path, dataset_root: Path) -> list[int]:
    """The rollout seed of every episode in a (delivered or derived) dataset, from each episode's result.json."""
    harvest_map = Path(dataset_root) / HARVEST_MAP
    if not harvest_map.is_file():
        raise BadInput(f"{harvest_map} is missing: the dataset was not written by the farm's harvest, so its "
                       "episodes' seeds are unknown; harvest it again with `datafarm farm WS`")
    from datafarm.farm.episodes import episode_dir

    seeds = []
    for entry in json.loads(harvest_map.read_text())["episodes"]:
        result = Path(workspace_root) / episode_dir(entry["farm_index"]) / "result.json"
        if not result.is_file():
            raise BadInput(f"{result} is missing: the workspace lost episode {entry['farm_index']}'s record; "
                           "restore the workspace or farm again")
        seeds.append(int(json.loads(result.read_text())["seed"]))
    return seeds
