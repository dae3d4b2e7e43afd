"""The CPU `composite` renderer: real background, projected tablecloth, colour-matched sim foreground.

Per episode (fitted once by `CompositeRenderer.prepare`, from a few sim frames and the references: the
whole-episode render samples them across the episode, a live stream has only its first frame):
- a global colour transfer (Reinhard, l-alpha-beta) from all sim views to all real references, for the
  robot and the task objects;
- per wrist camera, a transfer from the sim background to that camera's real references (wrist cameras
  move, so no plate fits them);
- the head camera's background plate (`references["head"][0]`, cropped and resized to the view),
  under the episode's background look (datafarm.render.appearance: relit or another backdrop, or as it is);
- the table plane height and a shading reference (a high percentile of the sim table's luminance).

Per time step (`CompositeStream.frame`, the one per-frame function: the whole-episode `render` calls it for
every frame, and closed-loop evaluation calls it live, frame by frame, on what the cameras see now)
the three sim views are tiled onto one canvas and processed together in linear light:
foreground transfer, tablecloth on the "table" pixels (the texture is projected onto the table plane
from each camera's pose, so it stays put on the table as the wrists move and is the same cloth in every
view, and is modulated by the sim's shading: shadows of the arms stay), the background, then one light
tint for the whole canvas.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from datafarm.render.appearance import Appearance
from datafarm.render.base import Renderer, RenderError, check_contract_cameras, check_references
from datafarm.render.contract import RenderContract
from datafarm.render.color import ColorTransfer, linear_to_srgb, luminance, srgb_to_linear
from datafarm.media import VideoWriter, iter_frames
from datafarm.render.views import (BACKGROUND, OBJECT, ROBOT, TABLE, class_height, class_maps,
                                   entity_class, load_camera_arrays, plane_points, pixel_rays, table_height_from)
from datafarm.sim.recorder import RecordedEpisode

log = logging.getLogger(__name__)

_MIN_BACKGROUND_PIXELS = 500  # fewer sim background pixels than this: the wrist uses the foreground transfer
_MAX_SHADING = 1.5


def _scatter(target: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """target[rows] = values for (N, 3) float32 arrays, copying whole pixels at once (several times faster)."""
    pixel = np.dtype((np.void, target.itemsize * 3))
    target.view(pixel).ravel()[rows] = np.ascontiguousarray(values, dtype=target.dtype).view(pixel).ravel()


def fit_to_view(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Centre-crop `image` to the view's aspect ratio and resize it to width x height (uint8 RGB)."""
    source_height, source_width = image.shape[:2]
    aspect = width / height
    crop_width = min(source_width, round(source_height * aspect))
    crop_height = min(source_height, round(crop_width / aspect))
    x0, y0 = (source_width - crop_width) // 2, (source_height - crop_height) // 2
    crop = np.ascontiguousarray(image[y0:y0 + crop_height, x0:x0 + crop_width])
    return np.asarray(Image.fromarray(crop).resize((width, height), Image.BILINEAR))


def texture_levels(texture: np.ndarray, count: int = 4) -> list[np.ndarray]:
    """A mip pyramid of the tileable texture in linear light (2 x 2 means), finest first."""
    levels = [srgb_to_linear(texture)]
    while len(levels) < count and levels[-1].shape[0] >= 8 and levels[-1].shape[0] % 2 == 0:
        level = levels[-1]
        levels.append(level.reshape(level.shape[0] // 2, 2, level.shape[1] // 2, 2, 3).mean(axis=(1, 3)))
    return levels


@dataclass(frozen=True)
class SimFrame:
    """One camera's sim view at one time step: what the per-frame render needs."""

    rgb: np.ndarray  # (H, W, 3) uint8
    classes: np.ndarray  # (H, W) uint8 pixel classes (datafarm.render.views)
    extrinsic: np.ndarray  # (4, 4) world -> camera, OpenCV axes


@dataclass
class _View:
    camera: str
    y0: int  # top row of the view on the canvas (views are stacked vertically)
    width: int
    height: int
    rays: np.ndarray  # (H * W, 3) camera-frame rays
    texture: np.ndarray  # (N * N, 3) linear texture at the mip level fitting this view's distance to the table
    texture_size: int
    plate: np.ndarray | None = None  # (H * W, 3) linear background plate (head)
    background_transfer: ColorTransfer | None = None  # wrists
    # The whole view's projected texture for one camera pose: reused while the camera does not move.
    cached_extrinsic: np.ndarray | None = None
    cached_table: np.ndarray | None = None
    previous_extrinsic: np.ndarray | None = None


def legend_classes(legend: dict[int, str]) -> np.ndarray:
    """A lookup entity id -> pixel class (uint8) from a segmentation legend (id -> entity name)."""
    lookup = np.full(max(legend, default=0) + 1, BACKGROUND, dtype=np.uint8)
    for entity_id, name in legend.items():
        lookup[int(entity_id)] = entity_class(name)
    return lookup


def classes_of(segmentation: np.ndarray, lookup: np.ndarray) -> np.ndarray:
    """Segmentation ids -> pixel classes; ids missing from the legend are objects (as `class_maps`)."""
    if segmentation.size and int(segmentation.max()) >= len(lookup):
        lookup = np.concatenate([lookup, np.full(int(segmentation.max()) + 1 - len(lookup), OBJECT, np.uint8)])
    return lookup[segmentation]


class CompositeStream:
    """One episode's fitted render: `frame` turns the sim views of one time step into rendered views."""

    def __init__(self, views: list[_View], foreground: ColorTransfer, shading_reference: float, table_height: float,
                 appearance: Appearance):
        self.views = views
        self.foreground = foreground
        self.shading_reference = shading_reference
        self.table_height = table_height
        self.rotation = np.deg2rad(appearance.texture_rotation_deg)
        self.scale = appearance.texture_scale_m
        self.gains = appearance.light_gains
        self.canvas = np.zeros((sum(v.height for v in views), max(v.width for v in views), 3), np.uint8)
        # The background family: each view's room light and backdrop; the head's plate restyled once.
        self.background = appearance.background
        self.restyled = self.background.look != "calibration"
        self.room_light = {v.camera: self.background.light(v.width, v.height) for v in views} if self.restyled else {}
        self.backdrop = {v.camera: self.background.pattern(v.width, v.height) for v in views} if self.restyled else {}
        self.plates = {v.camera: self._restyle(v.camera, v.plate, slice(None)) for v in views if v.plate is not None}

    @property
    def cameras(self) -> list[str]:
        return [view.camera for view in self.views]

    def frame(self, sim: dict[str, SimFrame]) -> dict[str, np.ndarray]:
        """Render one time step: the sim views (one per camera) -> the rendered views, (H, W, 3) uint8 each."""
        for view in self.views:
            self.canvas[view.y0:view.y0 + view.height, :view.width] = sim[view.camera].rgb
        linear = srgb_to_linear(self.canvas)
        out = np.zeros_like(linear)
        for view in self.views:
            rows = slice(view.y0, view.y0 + view.height)
            source = linear[rows, :view.width].reshape(-1, 3)
            classes = sim[view.camera].classes.ravel()
            result = np.empty_like(source)
            foreground = np.flatnonzero(classes >= ROBOT)
            _scatter(result, foreground, self.foreground.apply(np.take(source, foreground, axis=0)))
            table = np.flatnonzero(classes == TABLE)
            shading = np.minimum(luminance(np.take(source, table, axis=0)) / self.shading_reference, _MAX_SHADING)
            _scatter(result, table, self._table_texture(view, sim[view.camera].extrinsic, table) * shading[:, None])
            background = np.flatnonzero(classes == BACKGROUND)
            if view.plate is not None:
                _scatter(result, background, np.take(self.plates[view.camera], background, axis=0))
            else:
                transfer = view.background_transfer or self.foreground
                values = transfer.apply(np.take(source, background, axis=0))
                _scatter(result, background, self._restyle(view.camera, values, background))
            out[rows, :view.width] = result.reshape(view.height, view.width, 3)
        out *= self.gains
        rendered = linear_to_srgb(out)
        return {view.camera: np.ascontiguousarray(rendered[view.y0:view.y0 + view.height, :view.width])
                for view in self.views}

    def _restyle(self, camera: str, values: np.ndarray, pixels) -> np.ndarray:
        """Background colours (linear, one row per pixel of `pixels`) under this episode's background look."""
        if not self.restyled:
            return values
        backdrop = self.backdrop[camera]
        if backdrop is not None:
            values = backdrop[pixels] * luminance(values)[:, None]
        return values * self.room_light[camera][pixels]

    def _table_texture(self, view: _View, extrinsic: np.ndarray, pixels: np.ndarray) -> np.ndarray:
        """Linear texture colour (len(pixels), 3) where the rays of `pixels` (flat indices) meet the table.

        A camera that did not move since the last frame (the head camera, a wrist at rest) gets its
        whole view projected once and reused until it moves: the same values, computed once.
        """
        if view.cached_extrinsic is not None and np.array_equal(extrinsic, view.cached_extrinsic):
            return np.take(view.cached_table, pixels, axis=0)
        still = view.previous_extrinsic is not None and np.array_equal(extrinsic, view.previous_extrinsic)
        view.previous_extrinsic = extrinsic.copy()
        if not still:
            return self._project(view, extrinsic, pixels)
        view.cached_extrinsic = extrinsic.copy()
        view.cached_table = self._project(view, extrinsic, np.arange(view.width * view.height))
        return np.take(view.cached_table, pixels, axis=0)

    def _project(self, view: _View, extrinsic: np.ndarray, pixels: np.ndarray) -> np.ndarray:
        xy, _ = plane_points(np.take(view.rays, pixels, axis=0), extrinsic, self.table_height)
        cos, sin = np.float32(np.cos(self.rotation)), np.float32(np.sin(self.rotation))
        texels = np.float32(view.texture_size / self.scale)
        x, y = xy[:, 0] * texels, xy[:, 1] * texels
        u = np.floor(x * cos - y * sin).astype(np.int32) % view.texture_size
        v = np.floor(x * sin + y * cos).astype(np.int32) % view.texture_size
        return np.take(view.texture, v * view.texture_size + u, axis=0)


class CompositeRenderer(Renderer):
    """CPU compositing backend; see the module docstring for the algorithm and Renderer for the contract."""

    name = "composite"

    def __init__(self, color_strength: float = 0.8, stats_frames: int = 8, crf: int = 18,
                 plate_camera: str = "head"):
        self.color_strength = color_strength
        self.stats_frames = stats_frames
        self.crf = crf
        self.plate_camera = plate_camera
        self.last_timing: dict[str, float] = {}

    # ----- fitting: the same for a whole episode and for a live stream -------------------------------
    def prepare(self, cameras: dict[str, dict], table_height: float, samples: dict[str, list[SimFrame]],
                references: dict[str, list[np.ndarray]], appearance: Appearance) -> CompositeStream:
        """Fit one episode's render from sim `samples` (per camera, a few frames) and the real references.

        `cameras`: per camera its "width", "height" and "intrinsics" (an episode's meta["cameras"]).
        """
        missing = [camera for camera in cameras if not samples.get(camera)]
        if missing:
            raise RenderError(f"no sim frames of camera(s) {missing} to fit the render from")
        views = self._views(cameras, table_height, samples, appearance)
        linear = {camera: [(srgb_to_linear(f.rgb), f.classes) for f in frames] for camera, frames in samples.items()}
        self._fit_backgrounds(views, linear, references)
        foreground = self._fit_foreground(views, linear, references)
        return CompositeStream(views, foreground, self._table_luminance(views, linear), table_height, appearance)

    def start_stream(self, cameras: dict[str, dict], legend: dict[int, str], first: dict[str, object],
                     references: dict[str, list[np.ndarray]], appearance: Appearance,
                     depth_scale: float) -> CompositeStream:
        """A live render fitted on the first frame of each camera (`first`: camera -> datafarm.sim.rig.CameraFrame).

        Depth is quantized as the recorder stores it (`depth_scale` units per metre), so the table
        plane comes out as it would from a recorded episode.
        """
        lookup = legend_classes(legend)
        frames = {camera: live_frame(first[camera], lookup) for camera in cameras}
        depth = {camera: np.round(np.clip(first[camera].depth * depth_scale, 0, np.iinfo(np.uint16).max))
                 .astype(np.float32) / np.float32(depth_scale) for camera in cameras}
        table_height = table_height_from(
            [(frames[c].classes, depth[c], pixel_rays(cameras[c]), frames[c].extrinsic) for c in cameras], TABLE)
        check_references_for(list(cameras), references)
        return self.prepare(cameras, table_height or 0.0, {c: [f] for c, f in frames.items()}, references, appearance)

    # ----- the whole-episode render ------------------------------------------------------------------
    def render(self, episode: RecordedEpisode, references: dict[str, list[np.ndarray]], appearance: Appearance,
               output_dir: Path, contract: RenderContract | None = None) -> dict[str, Path]:
        check_references(episode, references)
        check_contract_cameras(episode, contract)
        started = time.perf_counter()
        output_dir = Path(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        frame_count = int(episode.meta["frames"])
        arrays = {camera: load_camera_arrays(episode, camera) for camera in episode.cameras}
        classes = {camera: class_maps(episode, arrays[camera]["segmentation"]) for camera in episode.cameras}
        samples = self._sample_frames(episode, classes, {c: a["extrinsics_cv"] for c, a in arrays.items()},
                                      frame_count)
        cameras = {camera: episode.meta["cameras"][camera] for camera in episode.cameras}
        stream = self.prepare(cameras, class_height(episode, TABLE) or 0.0, samples, references, appearance)
        prepared = time.perf_counter()

        partial = {camera: output_dir / f"{camera}.partial.mp4" for camera in stream.cameras}
        fps = int(episode.meta["fps"])
        written = 0
        try:
            writers = {camera: VideoWriter(partial[camera], fps, self.crf).__enter__() for camera in stream.cameras}
            try:
                streams = [iter_frames(episode.directory / "cameras" / camera / "rgb.mp4") for camera in stream.cameras]
                for t, frames in enumerate(zip(*streams)):
                    if t >= frame_count:
                        break
                    sim = {camera: SimFrame(frame, classes[camera][t], arrays[camera]["extrinsics_cv"][t])
                           for camera, frame in zip(stream.cameras, frames)}
                    for camera, rendered in stream.frame(sim).items():
                        writers[camera].write(rendered)
                    written += 1
            finally:
                for writer in writers.values():
                    writer.__exit__(None, None, None)
            if written != frame_count:
                raise RenderError(f"episode {episode.directory} declares {frame_count} frames, its sim videos "
                                  f"have {written}")
        except BaseException:
            for path in partial.values():
                path.unlink(missing_ok=True)
            raise
        finished = time.perf_counter()
        paths = {camera: path.replace(output_dir / f"{camera}.mp4") for camera, path in partial.items()}
        per_frame_ms = 1000 * (finished - prepared) / max(written, 1)
        self.last_timing = {"prepare_s": prepared - started, "frames": written, "per_frame_ms": per_frame_ms,
                            "total_s": finished - started}
        log.debug("composite render of %s: %d frames x %d views, %.1f ms per canvas incl. decode and encode "
                 "(+%.2f s preparation)", episode.directory.name, written, len(paths), per_frame_ms,
                 prepared - started)
        return paths

    # ----- parts of the fit ----------------------------------------------------------------------------
    def _views(self, cameras: dict[str, dict], table_height: float, samples: dict[str, list[SimFrame]],
               appearance: Appearance) -> list[_View]:
        levels = texture_levels(appearance.texture)
        views, y0 = [], 0
        for camera, spec in cameras.items():
            extrinsic = samples[camera][0].extrinsic
            # Mip level: one texel should not be much smaller than a pixel's footprint on the table.
            centre_depth = abs(table_height - float(-(extrinsic[:3, :3].T @ extrinsic[:3, 3])[2]))
            footprint = max(centre_depth, 1e-3) / float(np.asarray(spec["intrinsics"])[0][0])
            texel = appearance.texture_scale_m / levels[0].shape[0]
            level = int(np.clip(np.floor(np.log2(max(footprint / texel, 1.0))), 0, len(levels) - 1))
            texture = levels[level]
            views.append(_View(camera, y0, spec["width"], spec["height"], pixel_rays(spec).reshape(-1, 3),
                               texture.reshape(-1, 3), texture.shape[0]))
            y0 += spec["height"]
        return views

    def _sample_frames(self, episode: RecordedEpisode, classes: dict[str, np.ndarray],
                       extrinsics: dict[str, np.ndarray], count: int) -> dict[str, list[SimFrame]]:
        """A few frames spread over the episode (always its first one, the pose the mip level is chosen at)."""
        picks = set(np.linspace(0, count - 1, min(self.stats_frames, count)).round().astype(int).tolist())
        samples: dict[str, list[SimFrame]] = {}
        for camera in episode.cameras:
            frames = [SimFrame(frame, classes[camera][t], extrinsics[camera][t])
                      for t, frame in enumerate(iter_frames(episode.directory / "cameras" / camera / "rgb.mp4"))
                      if t in picks]
            if not frames:
                raise RenderError(f"sim video of camera {camera} in {episode.directory} has no frames")
            samples[camera] = frames
        return samples

    def _fit_backgrounds(self, views: list[_View], samples: dict[str, list],
                         references: dict[str, list[np.ndarray]]) -> None:
        for view in views:
            refs = [srgb_to_linear(fit_to_view(np.asarray(r), view.width, view.height))
                    for r in references[view.camera]]
            if view.camera == self.plate_camera:
                view.plate = refs[0].reshape(-1, 3)
                continue
            pixels = [frame[classes == BACKGROUND] for frame, classes in samples[view.camera]]
            source = np.concatenate(pixels) if pixels else np.zeros((0, 3), np.float32)
            if len(source) >= _MIN_BACKGROUND_PIXELS:
                view.background_transfer = ColorTransfer.fit(source, np.stack(refs), self.color_strength)

    def _fit_foreground(self, views: list[_View], samples: dict[str, list],
                        references: dict[str, list[np.ndarray]]) -> ColorTransfer:
        source = np.concatenate([frame.reshape(-1, 3) for view in views for frame, _ in samples[view.camera]])
        target = np.concatenate([srgb_to_linear(fit_to_view(np.asarray(r), view.width, view.height)).reshape(-1, 3)
                                 for view in views for r in references[view.camera]])
        return ColorTransfer.fit(source, target, self.color_strength)

    def _table_luminance(self, views: list[_View], samples: dict[str, list]) -> float:
        values = [luminance(frame[classes == TABLE]) for view in views for frame, classes in samples[view.camera]]
        values = np.concatenate(values) if values else np.zeros(0)
        return float(np.percentile(values, 90)) if len(values) > 100 else 1.0


def live_frame(frame, lookup: np.ndarray) -> SimFrame:
    """A rig CameraFrame (datafarm.sim.rig) as the per-frame render takes it."""
    return SimFrame(np.ascontiguousarray(frame.rgb), classes_of(frame.segmentation.astype(np.uint16), lookup),
                    np.asarray(frame.extrinsic_cv))


def check_references_for(cameras: list[str], references: dict[str, list[np.ndarray]]) -> None:
    missing = [camera for camera in cameras if not references.get(camera)]
    if missing:
        raise RenderError(f"no reference frames for camera(s) {missing}; got references for {sorted(references)}")
