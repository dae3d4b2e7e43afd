"""The table plane from the head view and the arms' reach.

- Height: the arm bases stand on the table top (the AgileX layout), so the plane is at the mean
  height of the rig's arm mounts; the image cannot give an absolute height by itself.
- Colour: patches where the camera sees a grid of table points between and in front of the arms; the
  colour most of them share is the table's (objects and arms cover a few); a texture crop for renderers.
- Extent: the table pixels (within `COLOUR_TOLERANCE` of that colour, the connected region holding
  the seed, its convex hull filled) cast onto the plane through the fitted camera; a side whose pixels touch
  the image border is reported as continuing beyond the view.
- Reach: the share of the visible table within `REACH_M` of either arm base.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw
from scipy.ndimage import binary_fill_holes, binary_opening, label
from scipy.spatial import ConvexHull, QhullError

from datafarm.sim.config import RigConfig
from datafarm.sim.spaces import SIDES
from datafarm.survey.camera import PinholeCamera

COLOUR_TOLERANCE = 28.0  # RGB distance (0-255) within which a pixel has the table's colour
REACH_M = 0.6  # the PiPER's reach from its base (626 mm, less a margin for the gripper's approach)
_SEED_FORWARD_M = 0.3
_SEED_HALF_PX = 3
_SAMPLE_PX = 48


@dataclass
class TablePlane:
    height: float
    colour: np.ndarray  # (3,) RGB 0-255
    mask: np.ndarray  # (H, W) bool: the table's pixels, what stands on it included
    extent: dict  # x_min, x_max, y_min, y_max (m, world) and beyond_view sides
    reach_share: float
    sample: np.ndarray  # (S, S, 3) uint8 texture crop
    seed_px: tuple[int, int]

    @property
    def brightness(self) -> float:
        return float(self.colour.max())

    def report(self) -> dict:
        return {"normal": [0, 0, 1], "height": round(self.height, 4), "source": "arm mounts (bases on the table top)",
                "colour_rgb": (self.colour / 255).round(3).tolist(), "extent": self.extent,
                "reach_m": REACH_M, "share_within_reach": round(self.reach_share, 3),
                "sample": "keyframes/table_sample.png", "seed_px": list(self.seed_px)}


def _seed_points(rig: RigConfig, height: float) -> np.ndarray:
    """A grid of table points in front of and between the arms (they face +y: configs/rig)."""
    bases = np.array([rig.arms[s].xyz for s in SIDES])
    middle = bases.mean(axis=0)
    half_span = np.abs(bases[:, 0] - middle[0]).max()
    xs = middle[0] + np.linspace(-half_span, half_span, 7)
    ys = middle[1] + np.linspace(0.1, _SEED_FORWARD_M + 0.2, 6)
    x, y = np.meshgrid(xs, ys)
    return np.stack([x.ravel(), y.ravel(), np.full(x.size, height)], axis=1)


def _table_seed(plate: np.ndarray, camera: PinholeCamera, rig: RigConfig, height: float) -> tuple[int, int, np.ndarray]:
    """The pixel and colour of the table: among patches at the grid points, the colour most of them share
    (objects and arms cover a few of them, the table most)."""
    h, w = plate.shape[:2]
    uv, front = camera.project(_seed_points(rig, height))
    r = _SEED_HALF_PX
    ok = front & (uv[:, 0] >= r) & (uv[:, 0] < w - r) & (uv[:, 1] >= r) & (uv[:, 1] < h - r)
    pixels = np.round(uv[ok]).astype(int) if ok.any() else np.array([[w // 2, int(h * 0.6)]])
    colours = np.array([np.median(plate[v - r: v + r + 1, u - r: u + r + 1].reshape(-1, 3), axis=0) for u, v in pixels])
    agree = (np.linalg.norm(colours[:, None] - colours[None], axis=2) < COLOUR_TOLERANCE / 2).sum(axis=1)
    best = int(np.argmax(agree))
    shared = np.linalg.norm(colours - colours[best], axis=1) < COLOUR_TOLERANCE / 2
    return int(pixels[best, 0]), int(pixels[best, 1]), np.median(colours[shared], axis=0)


def survey_table(plate: np.ndarray, camera: PinholeCamera, rig: RigConfig) -> TablePlane:
    """Estimate the table plane from a background plate of the head camera; see the module docstring."""
    height = float(np.mean([rig.arms[s].xyz[2] for s in SIDES]))
    h, w = plate.shape[:2]
    u, v, colour = _table_seed(plate, camera, rig, height)
    close = np.linalg.norm(plate.astype(np.float32) - colour, axis=2) < COLOUR_TOLERANCE
    close = binary_opening(close, iterations=1)
    labels, _ = label(close)
    region = labels == labels[v, u] if labels[v, u] else close
    mask = _convex_fill(binary_fill_holes(region))
    extent, reach_share = _extent(mask, camera, rig, height)
    s = _SAMPLE_PX // 2
    top, left = int(np.clip(v - s, 0, max(h - _SAMPLE_PX, 0))), int(np.clip(u - s, 0, max(w - _SAMPLE_PX, 0)))
    sample = plate[top: top + _SAMPLE_PX, left: left + _SAMPLE_PX].copy()
    return TablePlane(height, colour, mask, extent, reach_share, sample, (u, v))


def _convex_fill(mask: np.ndarray) -> np.ndarray:
    """The mask's convex hull, filled: a table top is convex in the image, so what stands on it and
    hides its far edge (a cabinet) is still inside."""
    v, u = np.nonzero(mask)
    if len(u) < 3:
        return mask
    points = np.stack([u, v], axis=1).astype(float)
    try:
        hull = ConvexHull(points)
    except QhullError:
        return mask
    canvas = Image.new("1", (mask.shape[1], mask.shape[0]), 0)
    ImageDraw.Draw(canvas).polygon([tuple(p) for p in points[hull.vertices]], fill=1)
    return np.asarray(canvas, dtype=bool) | mask


def _extent(mask: np.ndarray, camera: PinholeCamera, rig: RigConfig, height: float) -> tuple[dict, float]:
    v, u = np.nonzero(mask)
    if not len(u):
        return {"x_min": None, "x_max": None, "y_min": None, "y_max": None, "beyond_view": []}, 0.0
    step = max(1, len(u) // 20000)
    points, hit = camera.on_plane(np.stack([u[::step], v[::step]], axis=1).astype(float) + 0.5, height)
    points = points[hit]
    x_min, x_max = np.percentile(points[:, 0], [1, 99])
    y_min, y_max = np.percentile(points[:, 1], [1, 99])
    h, w = mask.shape
    beyond = [side for side, edge in (("left", mask[:, 0]), ("right", mask[:, -1]), ("far", mask[0]),
                                      ("near", mask[-1])) if edge.mean() > 0.05]
    bases = np.array([rig.arms[s].xyz[:2] for s in SIDES])
    near = np.min(np.linalg.norm(points[:, None, :2] - bases[None], axis=2), axis=1) <= REACH_M
    extent = {"x_min": round(float(x_min), 3), "x_max": round(float(x_max), 3), "y_min": round(float(y_min), 3),
              "y_max": round(float(y_max), 3), "beyond_view": beyond}
    return extent, float(near.mean()) if len(near) else 0.0
