"""What the sim says about each camera view: pixel classes from the segmentation, rays, the table plane.

Entities are grouped into four classes through the episode's segmentation legend: the robot (links
named "left_*" / "right_*"), the table ("table"), the background (the floor, unnamed entities and no
hit) and task objects (everything else: scene objects and fixtures).
"""

from __future__ import annotations

import numpy as np

from datafarm.render.color import apply_matrix
from datafarm.sim.recorder import RecordedEpisode

BACKGROUND, TABLE, ROBOT, OBJECT = 0, 1, 2, 3
CLASS_NAMES = {BACKGROUND: "background", TABLE: "table", ROBOT: "robot", OBJECT: "object"}
_STILL_TRANSLATION_M = 5e-4
_STILL_ROTATION = 1e-3


def entity_class(name: str) -> int:
    """The pixel class of a segmentation entity, by its legend name."""
    if name == "table":
        return TABLE
    if name in ("floor", ""):
        return BACKGROUND
    if name.startswith(("left_", "right_")):
        return ROBOT
    return OBJECT


def class_lookup(episode: RecordedEpisode) -> np.ndarray:
    """A table entity id -> class (uint8) covering every id in the legend (id 0, no hit, is background)."""
    legend = {int(k): v for k, v in episode.meta["segmentation_legend"].items()}
    lookup = np.full(max(legend, default=0) + 1, BACKGROUND, dtype=np.uint8)
    for entity_id, name in legend.items():
        lookup[entity_id] = entity_class(name)
    return lookup


def load_camera_arrays(episode: RecordedEpisode, camera: str, depth: bool = False, segmentation: bool = True,
                       first: int | None = None) -> dict[str, np.ndarray]:
    """extrinsics_cv (T, 4, 4), segmentation (T, H, W) uint16 unless told not, depth_m float32 when asked.

    Reads only the asked members of the camera's frames.npz (cheaper than RecordedEpisode.frames), and
    with `first`, only the first `first` frames of each: the members are compressed streams, and
    inflating an episode's depth or ids costs a tenth of a second per camera.
    """
    path = episode.directory / "cameras" / camera / "frames.npz"
    if not path.exists():
        raise FileNotFoundError(f"episode {episode.directory} has no {path.relative_to(episode.directory)}")
    with np.load(path) as data:
        arrays = {"extrinsics_cv": _leading_frames(data, "extrinsics_cv", first)}
        if segmentation:
            arrays["segmentation"] = _leading_frames(data, "segmentation", first)
        if depth:
            depth_mm = _leading_frames(data, "depth_mm", first)
            arrays["depth_m"] = depth_mm.astype(np.float32) / np.float32(episode.meta["depth_scale"])
    return arrays


def _leading_frames(data: np.lib.npyio.NpzFile, name: str, count: int | None) -> np.ndarray:
    """Member `name` of an npz archive: all of it, or its first `count` frames, inflating only those."""
    if count is None:
        return data[name]
    with data.zip.open(f"{name}.npy") as stream:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(stream)
        if fortran_order or not shape:
            raise ValueError(f"{name} in {data.zip.filename} is not a C-ordered array of frames")
        array = np.empty((min(count, shape[0]), *shape[1:]), dtype=dtype)
        if stream.readinto(memoryview(array).cast("B")) != array.nbytes:
            raise ValueError(f"{name} in {data.zip.filename} is truncated")
    return array


def class_maps(episode: RecordedEpisode, segmentation: np.ndarray) -> np.ndarray:
    """Segmentation ids (T, H, W) -> classes (T, H, W) uint8; ids missing from the legend are objects."""
    lookup = class_lookup(episode)
    if segmentation.size and int(segmentation.max()) >= len(lookup):
        lookup = np.concatenate([lookup, np.full(int(segmentation.max()) + 1 - len(lookup), OBJECT, np.uint8)])
    return lookup[segmentation]


def camera_rays(episode: RecordedEpisode, camera: str) -> np.ndarray:
    """(H, W, 3) float32 camera-frame rays through pixel centres, scaled to z = 1 (OpenCV axes)."""
    return pixel_rays(episode.meta["cameras"][camera])


def pixel_rays(spec: dict) -> np.ndarray:
    """camera_rays for a camera spec ("width", "height", "intrinsics"), recorded or live."""
    intrinsics = np.asarray(spec["intrinsics"], dtype=np.float64)
    v, u = np.mgrid[0:spec["height"], 0:spec["width"]] + 0.5
    pixels = np.stack([u, v, np.ones_like(u)], axis=-1).astype(np.float32)
    return apply_matrix(pixels, np.linalg.inv(intrinsics))


def world_rays(rays: np.ndarray, extrinsic_cv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Camera centre (3,) and world-frame ray directions (H, W, 3) for a world -> camera extrinsic."""
    rotation = extrinsic_cv[:3, :3].astype(np.float32)
    centre = -rotation.T @ extrinsic_cv[:3, 3].astype(np.float32)
    return centre, apply_matrix(rays, rotation.T)  # world direction R^T r


def plane_points(rays: np.ndarray, extrinsic_cv: np.ndarray, height: float) -> tuple[np.ndarray, np.ndarray]:
    """Where each pixel's ray meets the horizontal plane z = `height`: world xy (..., 2) and a hit mask (...)."""
    centre, directions = world_rays(rays, extrinsic_cv)
    dz = directions[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = (height - centre[2]) / dz
    hit = np.isfinite(distance) & (distance > 0)
    distance = np.where(hit, distance, 0.0).astype(np.float32)
    xy = centre[:2] + distance[..., None] * directions[..., :2]
    return xy, hit


def class_height(episode: RecordedEpisode, wanted: int) -> float | None:
    """Median world height (m) of the pixels of class `wanted` (depth back-projected), or None if never seen."""
    views = []
    for camera in episode.cameras:
        arrays = load_camera_arrays(episode, camera, depth=True, first=1)
        classes = class_maps(episode, arrays["segmentation"][:1])[0]
        views.append((classes, arrays["depth_m"][0], camera_rays(episode, camera), arrays["extrinsics_cv"][0]))
    return table_height_from(views, wanted)


def table_height_from(views: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], wanted: int) -> float | None:
    """class_height from in-memory views: (classes, depth_m, rays, extrinsic_cv) per camera, in camera order."""
    for classes, depth, rays, extrinsic in views:
        mask = (classes == wanted) & (depth > 0)
        if mask.sum() < 20:
            continue
        centre, directions = world_rays(rays, extrinsic)
        heights = centre[2] + depth[mask] * directions[mask][:, 2]  # rays have camera z = 1, depth is z-depth
        return float(np.median(heights))
    return None


def still_camera_steps(extrinsics: np.ndarray) -> np.ndarray:
    """(T - 1,) bool: the camera did not move between frame t and t + 1."""
    if len(extrinsics) < 2:
        return np.zeros(0, dtype=bool)
    translation = np.linalg.norm(np.diff(extrinsics[:, :3, 3], axis=0), axis=-1)
    rotation = np.abs(np.diff(extrinsics[:, :3, :3], axis=0)).max(axis=(1, 2))
    return (translation < _STILL_TRANSLATION_M) & (rotation < _STILL_ROTATION)
