"""The CPU `composite` renderer: real background, projected tablecloth, colour-matched sim foreground.

Per episode (fitted once, from a few sampled sim frames and the references):
- a global colour transfer (Reinhard, l-alpha-beta) from all sim views to all real references, for the
  robot and the task objects;
- per wrist camera, a transfer from the sim background to that camera's real references (wrist cameras
  move, so no plate fits them);
- the head camera's background plate (`references["head"][0]`, cropped and resized to the view);
- the table plane height and a shading reference (a high percentile of the sim table's luminance).

Per time step the three sim views are tiled onto one canvas and processed together in linear light:
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

from datafarm.media import VideoWriter
from datafarm.render.appearance import Appearance
from datafarm.render.base import Renderer, RenderError, check_references
from datafarm.render.color import ColorTransfer, linear_to_srgb, luminance, srgb_to_linear
from datafarm.render.video import iter_frames
from datafarm.render.views import (BACKGROUND, ROBOT, TABLE, camera_rays, class_height, class_maps, load_camera_arrays,
                                   plane_points, still_camera_steps)
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


@dataclass
class _View:
    camera: str
    y0: int  # top row of the view on the canvas (views are stacked vertically)
    width: int
    height: int
    rays: np.ndarray  # (H * W, 3) camera-frame rays
    classes: np.ndarray  # (T, H, W) uint8
    extrinsics: np.ndarray  # (T, 4, 4)
    static: bool  # camera pose constant for the whole episode
    texture: np.ndarray  # (N * N, 3) linear texture at the mip level fitting this view's distance to the table
    texture_size: int
    plate: np.ndarray | None = None  # (H * W, 3) linear background plate (head)
    background_transfer: ColorTransfer | None = None  # wrists
    cached_table: np.ndarray | None = None  # (H * W, 3) projected texture of a static camera


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

    def render(self, episode: RecordedEpisode, references: dict[str, list[np.ndarray]], appearance: Appearance,
               output_dir: Path) -> dict[str, Path]:
        check_references(episode, references)
        started = time.perf_counter()
        output_dir = Path(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        frame_count = int(episode.meta["frames"])
        self._table_height = class_height(episode, TABLE) or 0.0
        self._rotation = np.deg2rad(appearance.texture_rotation_deg)
        self._scale = appearance.texture_scale_m
        self._gains = appearance.light_gains
        views = self._views(episode, appearance)
        samples = self._sample_frames(episode, views, frame_count)
        self._fit_backgrounds(views, samples, references)
        self._foreground = self._fit_foreground(views, samples, references)
        self._shading_reference = self._table_luminance(views, samples)
        prepared = time.perf_counter()

        partial = {view.camera: output_dir / f"{view.camera}.partial.mp4" for view in views}
        fps = int(episode.meta["fps"])
        written = 0
        canvas = np.zeros((sum(v.height for v in views), max(v.width for v in views), 3), np.uint8)
        try:
            writers = [VideoWriter(partial[view.camera], fps, self.crf).__enter__() for view in views]
            try:
                streams = [iter_frames(episode.directory / "cameras" / view.camera / "rgb.mp4") for view in views]
                for t, frames in enumerate(zip(*streams)):
                    if t >= frame_count:
                        break
                    for view, frame in zip(views, frames):
                        canvas[view.y0:view.y0 + view.height, :view.width] = frame
                    out = self.compose(t, canvas, views)
                    for view, writer in zip(views, writers):
                        writer.write(np.ascontiguousarray(out[view.y0:view.y0 + view.height, :view.width]))
                    written += 1
            finally:
                for writer in writers:
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
        log.info("composite render of %s: %d frames x %d views, %.1f ms per canvas incl. decode and encode "
                 "(+%.2f s preparation)", episode.directory.name, written, len(views), per_frame_ms,
                 prepared - started)
        return paths

    def compose(self, t: int, canvas: np.ndarray, views: list[_View]) -> np.ndarray:
        """One time step: the sim canvas (views stacked, uint8) -> the rendered canvas (uint8)."""
        linear = srgb_to_linear(canvas)
        out = np.zeros_like(linear)
        for view in views:
            rows = slice(view.y0, view.y0 + view.height)
            source = linear[rows, :view.width].reshape(-1, 3)
            classes = view.classes[t].ravel()
            result = np.empty_like(source)
            foreground = np.flatnonzero(classes >= ROBOT)
            _scatter(result, foreground, self._foreground.apply(np.take(source, foreground, axis=0)))
            table = np.flatnonzero(classes == TABLE)
            shading = np.minimum(luminance(np.take(source, table, axis=0)) / self._shading_reference, _MAX_SHADING)
            _scatter(result, table, self._table_texture(view, t, table) * shading[:, None])
            background = np.flatnonzero(classes == BACKGROUND)
            if view.plate is not None:
                _scatter(result, background, np.take(view.plate, background, axis=0))
            else:
                transfer = view.background_transfer or self._foreground
                _scatter(result, background, transfer.apply(np.take(source, background, axis=0)))
            out[rows, :view.width] = result.reshape(view.height, view.width, 3)
        out *= self._gains
        return linear_to_srgb(out)

    def _table_texture(self, view: _View, t: int, pixels: np.ndarray) -> np.ndarray:
        """Linear texture colour (len(pixels), 3) where the rays of `pixels` (flat indices) meet the table."""
        if view.cached_table is not None:
            return np.take(view.cached_table, pixels, axis=0)
        if view.static:
            pixels = np.arange(view.width * view.height)
        xy, _ = plane_points(np.take(view.rays, pixels, axis=0), view.extrinsics[t], self._table_height)
        cos, sin = np.float32(np.cos(self._rotation)), np.float32(np.sin(self._rotation))
        texels = np.float32(view.texture_size / self._scale)
        x, y = xy[:, 0] * texels, xy[:, 1] * texels
        u = np.floor(x * cos - y * sin).astype(np.int32) % view.texture_size
        v = np.floor(x * sin + y * cos).astype(np.int32) % view.texture_size
        colours = np.take(view.texture, v * view.texture_size + u, axis=0)
        if view.static:
            view.cached_table = colours
            return self._table_texture(view, t, np.flatnonzero(view.classes[t].ravel() == TABLE))
        return colours

    def _views(self, episode: RecordedEpisode, appearance: Appearance) -> list[_View]:
        levels = texture_levels(appearance.texture)
        views, y0 = [], 0
        for camera in episode.cameras:
            spec = episode.meta["cameras"][camera]
            arrays = load_camera_arrays(episode, camera)
            extrinsics = arrays["extrinsics_cv"]
            # Mip level: one texel should not be much smaller than a pixel's footprint on the table.
            centre_depth = abs(self._table_height - float(-(extrinsics[0, :3, :3].T @ extrinsics[0, :3, 3])[2]))
            footprint = max(centre_depth, 1e-3) / float(np.asarray(spec["intrinsics"])[0][0])
            texel = appearance.texture_scale_m / levels[0].shape[0]
            level = int(np.clip(np.floor(np.log2(max(footprint / texel, 1.0))), 0, len(levels) - 1))
            texture = levels[level]
            views.append(_View(camera, y0, spec["width"], spec["height"], camera_rays(episode, camera).reshape(-1, 3),
                               class_maps(episode, arrays["segmentation"]), extrinsics,
                               bool(still_camera_steps(extrinsics).all()), texture.reshape(-1, 3), texture.shape[0]))
            y0 += spec["height"]
        return views

    def _sample_frames(self, episode: RecordedEpisode, views: list[_View], count: int) -> dict[str, list]:
        picks = set(np.linspace(0, count - 1, min(self.stats_frames, count)).round().astype(int).tolist())
        samples: dict[str, list] = {}
        for view in views:
            frames = []
            for t, frame in enumerate(iter_frames(episode.directory / "cameras" / view.camera / "rgb.mp4")):
                if t in picks:
                    frames.append((t, srgb_to_linear(frame)))
            if not frames:
                raise RenderError(f"sim video of camera {view.camera} in {episode.directory} has no frames")
            samples[view.camera] = frames
        return samples

    def _fit_backgrounds(self, views: list[_View], samples: dict[str, list],
                         references: dict[str, list[np.ndarray]]) -> None:
        for view in views:
            refs = [srgb_to_linear(fit_to_view(np.asarray(r), view.width, view.height))
                    for r in references[view.camera]]
            if view.camera == self.plate_camera:
                view.plate = refs[0].reshape(-1, 3)
                continue
            pixels = [frame[view.classes[t] == BACKGROUND] for t, frame in samples[view.camera]]
            source = np.concatenate(pixels) if pixels else np.zeros((0, 3), np.float32)
            if len(source) >= _MIN_BACKGROUND_PIXELS:
                view.background_transfer = ColorTransfer.fit(source, np.stack(refs), self.color_strength)

    def _fit_foreground(self, views: list[_View], samples: dict[str, list],
                        references: dict[str, list[np.ndarray]]) -> ColorTransfer:
        source = np.concatenate([frame.reshape(-1, 3) for view in views for _, frame in samples[view.camera]])
        target = np.concatenate([srgb_to_linear(fit_to_view(np.asarray(r), view.width, view.height)).reshape(-1, 3)
                                 for view in views for r in references[view.camera]])
        return ColorTransfer.fit(source, target, self.color_strength)

    def _table_luminance(self, views: list[_View], samples: dict[str, list]) -> float:
        values = [luminance(frame[view.classes[t] == TABLE]) for view in views for t, frame in samples[view.camera]]
        values = np.concatenate(values) if values else np.zeros(0)
        return float(np.percentile(values, 90)) if len(values) > 100 else 1.0
