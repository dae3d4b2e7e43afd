"""The offline object inventory: what stands on the table, from the head camera's background plate.

Classical and keyless: inside the table's region (holes filled, so what stands on it is included),
pixels whose colour is farther than `OBJECT_COLOUR_DISTANCE` from the table's colour, less the arms
(the arm model projected through the fitted camera at the recorded joint states, all its parts, and
the arm-dark pixels beside it, dilated), are grouped into connected blobs (holes filled, specks opened
away, split parts rejoined); a blob whose colours fall in two clusters that meet along a short border
is two objects touching in the image, split between them (`_blobs`).
Blobs cut by the image border (their size and place cannot be measured; often a backdrop the table's
colour let into the table region) and blobs beyond the arms' reach (`REACH_M`) are not listed. Each
blob big enough is one object:

- position: its lowest image point (at its mean column) is about where it meets the table nearest the
  camera; cast onto the table plane and pushed back along the line of sight by half its width (blobs
  wider than tall: flat things) or `PUSH_BACK_ROUND` of it (round things), that is its centre;
- size: width from the blob's horizontal extent at that depth, height from its top pixel's ray
  where it passes over the centre;
- colour: the blob's median colour, named in words; label: "<size> <colour> object";
- a crop PNG of the blob from the plate.

`match_scene` tells which items of a scene spec the inventory has (used by the build to flag a
request whose objects the footage does not show).
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import (binary_closing, binary_dilation, binary_erosion, binary_fill_holes, binary_opening,
                           distance_transform_edt, find_objects, label)
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import connected_components

from datafarm.scene.spec import footprint_radius
from datafarm.survey.camera import PinholeCamera
from datafarm.survey.table import REACH_M

OBJECT_COLOUR_DISTANCE = 26.0  # RGB distance (0-255) from the table colour that makes a pixel "object"
MIN_AREA_SHARE = 0.0004  # of the image: smaller blobs are noise
CHROMA_SPLIT = 0.1  # rg-chromaticity distance between two colour clusters that makes a blob two objects
CONTACT_SHARE = 0.8  # ...unless they share a border this long (a share of the smaller one's diameter)
_ARM_DILATION_PX = 4
# The lowest image point of a flat box or disc is its front edge on the table (push back half the width);
# a ball's is above the table and its ray meets the plane nearer its centre (push back less).
PUSH_BACK_ROUND = 0.3
FLAT_RATIO = 0.85  # a blob less tall than this share of its width (in the image) is flat
_TABLE_EDGE_EROSION_PX = 3
MATCH_MARGIN_M = 0.05  # an inventory item this far outside a scene item's placement range still matches
SIZE_WEIGHT = 0.5  # metres of assignment cost per metre of width mismatch (tells a nut from its plate)

_HUES = ((15, "red"), (40, "orange"), (70, "yellow"), (165, "green"), (200, "cyan"), (260, "blue"),
         (300, "purple"), (340, "pink"), (360, "red"))


def colour_word(rgb) -> str:
    """A plain colour name for an RGB triple (0-255)."""
    r, g, b = (float(c) / 255 for c in rgb)
    hue, lightness, saturation = colorsys.rgb_to_hls(r, g, b)
    if saturation < 0.25 or max(r, g, b) - min(r, g, b) < 0.12:
        return "black" if lightness < 0.22 else "grey" if lightness < 0.7 else "white"
    degrees = hue * 360
    return next(name for limit, name in _HUES if degrees < limit)


def size_word(size_m: float) -> str:
    return "small" if size_m < 0.06 else "medium" if size_m < 0.15 else "large"


@dataclass
class InventoryItem:
    label: str
    xy: tuple[float, float]  # m, world, on the table
    size: tuple[float, float]  # width, height (m)
    colour: tuple[float, float, float]  # RGB 0-1
    area_px: int
    bbox: tuple[int, int, int, int]  # left, top, right, bottom (px)
    crop: np.ndarray  # (h, w, 3) uint8
    mask: np.ndarray  # (H, W) bool

    def report(self, crop_path: str, mask_path: str | None = None) -> dict:
        return {"label": self.label, "xy": [round(self.xy[0], 4), round(self.xy[1], 4)],
                "size_m": {"width": round(self.size[0], 3), "height": round(self.size[1], 3)},
                "colour_rgb": [round(c, 3) for c in self.colour], "colour": self.label.split()[1],
                "area_px": self.area_px, "bbox_px": list(self.bbox), "crop": crop_path, "mask": mask_path,
                "source": "offline classical"}


def _centre_and_size(blob: np.ndarray, camera: PinholeCamera, table_height: float):
    v, u = np.nonzero(blob)
    bottom = v.max()
    front_u = u.mean()
    front, hit = camera.on_plane(np.array([[front_u + 0.5, bottom + 1.0]]), table_height)
    if not hit[0]:
        return None
    depth = float(camera.to_camera(front)[0, 2])
    width = (u.max() - u.min() + 1) * depth / camera.intrinsics[0, 0]
    sight = front[0, :2] - camera.eye[:2]
    sight /= max(np.linalg.norm(sight), 1e-9)
    top_ray = camera.rays(np.array([[u[v == v.min()].mean() + 0.5, v.min() + 0.0]]))[0]
    horizontal = np.linalg.norm(top_ray[:2])
    flat = (v.max() - v.min() + 1) < FLAT_RATIO * (u.max() - u.min() + 1)  # in the image: wider than tall
    centre = front[0, :2] + sight * width * (0.5 if flat else PUSH_BACK_ROUND)
    reach = np.linalg.norm(centre - camera.eye[:2]) / max(horizontal, 1e-9)
    height = max(float(camera.eye[2] + top_ray[2] * reach - table_height), 0.0)
    return centre, width, height


def _touches_border(box: tuple[slice, slice], h: int, w: int) -> bool:
    """Within the table-edge erosion (plus a pixel) of the image border."""
    m = _TABLE_EDGE_EROSION_PX + 1
    return box[0].start <= m or box[1].start <= m or box[0].stop >= h - m or box[1].stop >= w - m


def _without_specks(mask: np.ndarray) -> np.ndarray:
    """`mask` with the specks of colour noise opened away. A nut or a cup seen from above is a thin ring,
    often broken where its rim matches the table: the ring is closed and its hole filled first, or the
    opening would erase it."""
    return binary_opening(binary_fill_holes(binary_closing(mask, iterations=2)), iterations=1)


def _two_means(values: np.ndarray, iterations: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """2-means of (N, D) values, started from the two ends of their principal axis: (labels 0/1, centres)."""
    centred = values - values.mean(axis=0)
    axis = np.linalg.svd(centred, full_matrices=False)[2][0]
    projection = centred @ axis
    centres = values[[projection.argmin(), projection.argmax()]]
    for _ in range(iterations):
        labels = (np.linalg.norm(values - centres[1], axis=1) < np.linalg.norm(values - centres[0], axis=1)).astype(int)
        centres = np.array([values[labels == k].mean(axis=0) if (labels == k).any() else centres[k] for k in (0, 1)])
    return labels, centres


def _blobs(candidates: np.ndarray, plate: np.ndarray, shade: np.ndarray, min_area: float) -> np.ndarray:
    """Labelled blobs of `candidates`. Objects touching in the image are told apart by colour: a connected
    region whose lit pixels fall in two chromaticity clusters `CHROMA_SPLIT` apart, each with a part of at
    least `min_area` pixels (a blue bowl against a cream one), is split between those parts, each pixel to
    the nearest, unless they meet along a long border (`_rejoin_long_contacts`). Brightness does not split
    (a cabinet's lit top and shaded front are one object), and shaded pixels, whose chromaticity is
    noise, take no part in the clustering."""
    regions, count = label(_without_specks(candidates))
    chroma = plate.astype(np.float32) / np.maximum(plate.astype(np.float32).sum(axis=2, keepdims=True), 1.0)
    blobs = regions.copy()
    for index, box in enumerate(find_objects(regions), start=1):
        region = regions[box] == index
        lit = region & ~shade[box]
        if lit.sum() < 2 * min_area:
            continue
        clusters, centres = _two_means(chroma[box][lit][:, :2])
        if np.linalg.norm(centres[0] - centres[1]) < CHROMA_SPLIT:
            continue
        seeds = np.zeros(region.shape, dtype=int)
        for cluster in (0, 1):
            member = np.zeros(region.shape, dtype=bool)
            member[lit] = clusters == cluster
            parts, _ = label(binary_opening(member, iterations=1))
            for part in np.flatnonzero(np.bincount(parts.ravel())[1:] >= min_area) + 1:
                seeds[parts == part] = seeds.max() + 1
        if seeds.max() < 2:
            continue
        _, nearest = distance_transform_edt(seeds == 0, return_indices=True)
        split = _rejoin_long_contacts(np.where(region, seeds[nearest[0], nearest[1]], 0))
        blobs[box][region] = count + split[region]
        count += int(seeds.max())
    return blobs


def _rejoin_long_contacts(parts: np.ndarray) -> np.ndarray:
    """`parts` (0: none, else 1..N) with every two parts that share a border longer than `CONTACT_SHARE` of
    the smaller one's diameter made one: objects touching in the image meet along a short stretch, the
    parts of one object (a drum's yellow head on its red body, a cabinet's cream top over its tan drawer)
    along a long one."""
    count = int(parts.max())
    diameter = 2 * np.sqrt(np.bincount(parts.ravel(), minlength=count + 1) / np.pi)
    border = np.zeros((count + 1, count + 1), dtype=int)  # 4-neighbour pixel pairs between two parts
    for a, b in ((parts[1:], parts[:-1]), (parts[:, 1:], parts[:, :-1])):
        touching = (a != b) & (a > 0) & (b > 0)
        np.add.at(border, (a[touching], b[touching]), 1)
    border += border.T
    joined = border > CONTACT_SHARE * np.minimum(diameter[:, None], diameter[None, :])
    _, group = connected_components(joined[1:, 1:], directed=False)
    return np.concatenate([[0], group + 1])[parts]


def find_objects_on_table(plate: np.ndarray, table_mask: np.ndarray, table_colour: np.ndarray,
                          camera: PinholeCamera, table_height: float, arm_mask: np.ndarray,
                          arm_bases: np.ndarray | None = None, *, shade: np.ndarray) -> list[InventoryItem]:
    """The inventory of one plate; see the module docstring. `arm_mask`: pixels the arms may cover;
    `arm_bases`: (N, 2) world xy of the arm bases, beyond whose reach nothing is listed; `shade`: pixels
    too dark for their colour to tell objects apart."""
    h, w = table_mask.shape
    distance = np.linalg.norm(plate.astype(np.float32) - table_colour.astype(np.float32), axis=2)
    inside = binary_erosion(table_mask, iterations=_TABLE_EDGE_EROSION_PX)
    candidates = inside & (distance > OBJECT_COLOUR_DISTANCE) & ~binary_dilation(arm_mask, iterations=_ARM_DILATION_PX)
    labels = _blobs(candidates, plate, shade, MIN_AREA_SHARE * h * w)
    items = []
    for index, box in enumerate(find_objects(labels), start=1):
        if box is None:  # an id given up by a split region
            continue
        blob = labels == index
        area = int(blob.sum())
        if area < MIN_AREA_SHARE * h * w or _touches_border(box, h, w):
            continue
        placed = _centre_and_size(blob, camera, table_height)
        if placed is None:
            continue
        centre, width, height = placed
        if arm_bases is not None and np.linalg.norm(np.asarray(arm_bases) - centre, axis=1).min() > REACH_M:
            continue
        colour = np.median(plate[blob], axis=0)
        top, bottom, left, right = box[0].start, box[0].stop, box[1].start, box[1].stop
        pad = 4
        crop = plate[max(top - pad, 0): bottom + pad, max(left - pad, 0): right + pad].copy()
        size = max(width, height)
        items.append(InventoryItem(f"{size_word(size)} {colour_word(colour)} object", (float(centre[0]), float(centre[1])),
                                   (float(width), float(height)), tuple(float(c) / 255 for c in colour), area,
                                   (int(left), int(top), int(right), int(bottom)), crop, blob))
    items.sort(key=lambda item: -item.area_px)
    return items


def can_be_seen(mask: np.ndarray) -> bool:
    """Whether an object covering `mask` in the head view is big enough for this inventory to find, at any
    contrast: some of it survives the opening that removes noise, and that is a blob of at least
    `MIN_AREA_SHARE` of the image. A 1 cm nut or a screw's 6 mm shaft from the head camera at 320x240 is not."""
    return int(_without_specks(mask).sum()) >= MIN_AREA_SHARE * mask.size


def placement_box(item) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) corners of where a scene item's centre may be placed: nominal + its randomization."""
    nominal = np.asarray(item.xy, dtype=float)
    return (nominal + [item.randomize.x[0], item.randomize.y[0]], nominal + [item.randomize.x[1], item.randomize.y[1]])


def distance_to_placement(item, xy) -> float:
    """Metres from `xy` to the scene item's placement range (0 inside it)."""
    low, high = placement_box(item)
    return float(np.linalg.norm(np.asarray(xy) - np.clip(xy, low, high)))


def match_scene(spec, inventory: list[dict]) -> dict[str, dict]:
    """For every object and fixture on the table in a scene spec: the inventory item assigned to it, found
    when within `MATCH_MARGIN_M` (a fixture: its footprint radius, if more) of the item's placement range.

    One optimal assignment over all pairs (each inventory item used once), not nearest-first: with
    overlapping placement ranges (a nut that may lie anywhere around its plate) the first item would take
    the blob that belongs to the second. Cost: metres outside the range, plus `SIZE_WEIGHT` times the
    difference between the item's footprint diameter and the blob's width (where the inventory has one)."""
    items = [item for item in [*spec.objects, *spec.fixtures] if item.support == "table"]
    gaps = np.array([[distance_to_placement(item, found["xy"]) for found in inventory] for item in items])
    gaps = gaps.reshape(len(items), len(inventory))
    # a fixture's estimated centre may be off by more (a cabinet's lowest point is its open drawer)
    margins = np.array([max(MATCH_MARGIN_M, getattr(item, "footprint_radius", 0.0)) for item in items])
    widths = np.array([found.get("size_m", {}).get("width", np.nan) for found in inventory], dtype=float)
    sizes = np.abs(widths[None, :] - 2 * np.array([footprint_radius(item) for item in items])[:, None])
    cost = gaps + SIZE_WEIGHT * np.nan_to_num(sizes, nan=0.0)
    allowed = gaps <= margins[:, None]
    rows, cols = linear_sum_assignment(np.where(allowed, cost, cost.max(initial=0.0) + 1e3))
    assigned = {int(r): int(c) for r, c in zip(rows, cols) if allowed[r, c]}
    matches = {}
    for row, item in enumerate(items):
        if row in assigned:
            i = assigned[row]
            matches[item.name] = {"found": True, "inventory_index": i, "label": inventory[i]["label"],
                                  "xy": inventory[i]["xy"], "outside_range_m": round(float(gaps[row, i]), 4)}
        else:
            matches[item.name] = {"found": False,
                                  "nearest_m": round(float(gaps[row].min()), 4) if len(inventory) else None}
    return matches
