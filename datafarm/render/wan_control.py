"""What the video model is conditioned on, built from a simulated episode (numpy only; no torch here).

- The canvas: the episode's views, each resized to one cell (height and width multiples of 16), tiled
  row-major on one canvas (`CanvasLayout`); a cell with no camera is black and kept (mask 0).
- The control video: per view the sim's depth (near is bright, normalised over the whole episode so the
  brightness does not flicker) or its edges (colour edges of the sim render and segmentation boundaries).
- The mask: white (generate) everywhere a view is; with the contract's `robot: keep`, the robot's pixels
  are black (kept) and carry the sim render itself, so the arms stay exactly where the simulation put them.
- The reference image: the calibration frames of every camera tiled in the same layout, so each cell of
  the canvas is shown its own real camera.
- The chunks: windows of 4k+1 frames (Wan's VAE compresses time by 4 after the first frame); each window
  after the first starts with `overlap` frames already generated, given as kept conditioning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from datafarm.render.base import RenderError
from datafarm.render.composite import fit_to_view
from datafarm.render.contract import RenderContract
from datafarm.render.views import ROBOT, class_maps, load_camera_arrays
from datafarm.sim.recorder import RecordedEpisode

SIZE_STEP = 16  # Wan: VAE x8 spatially, then 2 x 2 patches


def is_frame_count(frames: int) -> bool:
    """Whether `frames` has Wan's form 4k + 1."""
    return frames >= 1 and frames % 4 == 1


@dataclass(frozen=True)
class CanvasLayout:
    """Views tiled row-major on one canvas, `columns` cells wide, every cell cell_height x cell_width."""

    cameras: tuple[str, ...]
    cell_height: int
    cell_width: int
    columns: int

    def __post_init__(self) -> None:
        if self.cell_height % SIZE_STEP or self.cell_width % SIZE_STEP or min(self.cell_height, self.cell_width) <= 0:
            raise RenderError(f"canvas cells must be positive multiples of {SIZE_STEP} pixels, got "
                              f"{self.cell_height} x {self.cell_width}; choose e.g. 240 x 320")
        if self.columns < 1 or not self.cameras:
            raise RenderError("a canvas needs at least one camera and one column")

    @property
    def rows(self) -> int:
        return -(-len(self.cameras) // self.columns)

    @property
    def height(self) -> int:
        return self.rows * self.cell_height

    @property
    def width(self) -> int:
        return self.columns * self.cell_width

    def origin(self, camera: str) -> tuple[int, int]:
        index = self.cameras.index(camera)
        return (index // self.columns) * self.cell_height, (index % self.columns) * self.cell_width

    def tile(self, views: dict[str, np.ndarray], fill: int = 0) -> np.ndarray:
        """Cell-sized views (..., h, w) or (..., h, w, C) -> one canvas (..., H, W[, C]); empty cells get `fill`."""
        sample = views[self.cameras[0]]
        channels = sample.shape[-2:] != (self.cell_height, self.cell_width)
        lead = sample.shape[:-3] if channels else sample.shape[:-2]
        trail = sample.shape[-1:] if channels else ()
        canvas = np.full((*lead, self.height, self.width, *trail), fill, dtype=sample.dtype)
        for camera in self.cameras:
            y0, x0 = self.origin(camera)
            cell = (Ellipsis, slice(y0, y0 + self.cell_height), slice(x0, x0 + self.cell_width))
            canvas[cell + ((slice(None),) if channels else ())] = views[camera]
        return canvas

    def untile(self, canvas: np.ndarray) -> dict[str, np.ndarray]:
        """(T, H, W, 3) canvas frames -> per camera (T, cell_height, cell_width, 3)."""
        views = {}
        for camera in self.cameras:
            y0, x0 = self.origin(camera)
            views[camera] = np.ascontiguousarray(canvas[:, y0:y0 + self.cell_height, x0:x0 + self.cell_width])
        return views


def resize_frames(frames: np.ndarray, width: int, height: int, nearest: bool = False) -> np.ndarray:
    """(T, h, w[, 3]) uint8 -> (T, height, width[, 3]) uint8."""
    if frames.shape[1:3] == (height, width):
        return frames
    method = Image.NEAREST if nearest else Image.BILINEAR
    return np.stack([np.asarray(Image.fromarray(frame).resize((width, height), method)) for frame in frames])


def depth_control(depth_m: np.ndarray) -> np.ndarray:
    """(T, H, W) metres -> (T, H, W) uint8: near bright, far dark, no hit black; one range for the episode."""
    valid = np.isfinite(depth_m) & (depth_m > 0)
    if not valid.any():
        return np.zeros(depth_m.shape, np.uint8)
    near, far = np.percentile(depth_m[valid], [1, 99])
    scaled = 1.0 - (depth_m - near) / max(far - near, 1e-6)
    return np.where(valid, np.clip(scaled * 235 + 20, 0, 255), 0).astype(np.uint8)


def edge_control(rgb: np.ndarray, segmentation: np.ndarray, threshold: float = 40.0) -> np.ndarray:
    """(T, H, W, 3) sim render + (T, H, W) ids -> (T, H, W) uint8 edge map (white lines on black)."""
    gray = rgb.astype(np.float32) @ np.float32([0.299, 0.587, 0.114])
    gx = np.zeros_like(gray)
    gy = np.zeros_like(gray)
    gx[:, :, 1:-1] = gray[:, :, 2:] - gray[:, :, :-2]
    gy[:, 1:-1, :] = gray[:, 2:, :] - gray[:, :-2, :]
    edges = np.hypot(gx, gy) > threshold
    boundary = np.zeros(segmentation.shape, bool)
    boundary[:, :, 1:] |= segmentation[:, :, 1:] != segmentation[:, :, :-1]
    boundary[:, 1:, :] |= segmentation[:, 1:, :] != segmentation[:, :-1, :]
    return np.where(edges | boundary, 255, 0).astype(np.uint8)


@dataclass
class Conditioning:
    """One episode's canvas inputs: control (T, H, W, 3) uint8, mask (T, H, W) uint8 (255 = generate),
    reference (H, W, 3) uint8."""

    control: np.ndarray
    mask: np.ndarray
    reference: np.ndarray

    def __post_init__(self) -> None:
        frames, height, width = self.control.shape[:3]
        if self.control.shape != (frames, height, width, 3) or self.mask.shape != (frames, height, width) \
                or self.reference.shape != (height, width, 3):
            raise RenderError(f"conditioning shapes disagree: control {self.control.shape}, mask {self.mask.shape}, "
                              f"reference {self.reference.shape}")
        if height % SIZE_STEP or width % SIZE_STEP:
            raise RenderError(f"canvas {height} x {width} is not a multiple of {SIZE_STEP}")


def build_conditioning(episode: RecordedEpisode, references: dict[str, list[np.ndarray]],
                       contract: RenderContract, layout: CanvasLayout) -> Conditioning:
    """The canvas control video, mask and reference image of a whole episode (see the module docstring)."""
    frames = int(episode.meta["frames"])
    controls, masks, refs = {}, {}, {}
    size = (layout.cell_width, layout.cell_height)
    for camera in layout.cameras:
        rgb = episode.rgb(camera)[:frames]
        arrays = load_camera_arrays(episode, camera, depth=contract.control == "depth")
        if len(rgb) != frames or len(arrays["segmentation"]) < frames:
            raise RenderError(f"episode {episode.directory} declares {frames} frames, camera {camera} has "
                              f"{len(rgb)} video frames and {len(arrays['segmentation'])} segmentation frames")
        segmentation = arrays["segmentation"][:frames]
        if contract.control == "depth":
            control = depth_control(arrays["depth_m"][:frames])
        else:
            control = edge_control(rgb, segmentation)
        control = np.repeat(resize_frames(control, *size)[..., None], 3, axis=-1)
        robot = resize_frames((class_maps(episode, segmentation) == ROBOT).astype(np.uint8), *size, nearest=True) > 0
        mask = np.full(robot.shape, 255, np.uint8)
        if contract.robot == "keep":
            control[robot] = resize_frames(rgb, *size)[robot]
            mask[robot] = 0
        controls[camera], masks[camera] = control, mask
        choices = references[camera]
        refs[camera] = fit_to_view(np.asarray(choices[min(contract.reference_frame, len(choices) - 1)]), *size)
    return Conditioning(layout.tile(controls), layout.tile(masks), layout.tile(refs))


@dataclass(frozen=True)
class Chunk:
    """Episode frames [start, stop) generated in one window of `window` frames (4k+1; past `stop` the last
    control frame repeats); its first `keep` frames are the previous chunk's output, given as kept conditioning."""

    start: int
    stop: int
    keep: int
    window: int


def plan_chunks(total: int, chunk_frames: int, overlap: int) -> list[Chunk]:
    """Overlapping 4k+1 windows covering frames [0, total); a last short chunk gets the smallest window fitting."""
    if not is_frame_count(chunk_frames):
        raise RenderError(f"chunk_frames must have the form 4k+1 (e.g. 33, 49, 81), got {chunk_frames}")
    if not 0 < overlap < chunk_frames - 1:
        raise RenderError(f"overlap must be between 1 and {chunk_frames - 2} frames, got {overlap}")
    if total < 1:
        raise RenderError("an episode without frames cannot be rendered")
    chunks, start = [], 0
    while True:
        stop = min(start + chunk_frames, total)
        length = stop - start
        chunks.append(Chunk(start, stop, overlap if chunks else 0, length + (1 - length % 4) % 4))
        if stop >= total:
            return chunks
        start = stop - overlap


def chunk_inputs(conditioning: Conditioning, generated: np.ndarray, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
    """The control (window, H, W, 3) and mask (window, H, W) of one chunk: its first `keep` frames are the
    already generated frames (mask 0: keep them), the rest the sim control, padded by repeating the last frame."""
    control = conditioning.control[chunk.start:chunk.stop].copy()
    mask = conditioning.mask[chunk.start:chunk.stop].copy()
    if chunk.keep:
        control[:chunk.keep] = generated[chunk.start:chunk.start + chunk.keep]
        mask[:chunk.keep] = 0
    pad = chunk.window - len(control)
    if pad:
        control = np.concatenate([control, np.repeat(control[-1:], pad, axis=0)])
        mask = np.concatenate([mask, np.repeat(mask[-1:], pad, axis=0)])
    return control, mask
