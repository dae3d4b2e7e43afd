"""Grounding: does the rebuilt scene match the calibration footage?

The scene is rendered by the simulated rig from the surveyed cameras (`calibrated_rig_config`) at the
calibration keyframes' joint states. Each scene item the inventory found is placed where the footage
shows it, as far as its placement range allows (nominal + randomization), so the render is the
scene's closest layout to the real one. "Where the footage shows it" starts at the inventory's centre
(a guess from a blob of unknown shape) and is then refined with the scene's own geometry: the item's
rendered silhouette is slid in the image to where it overlaps the footage's best, that shift is carried
onto the table through its front edge, and the scene rendered again. Scores:

- per object: its position error (cm from the surveyed position to its placement range, 0 inside)
  and the IoU of its rendered mask with the inventory blob; an item the inventory lacks fails, unless
  its render is too small for the inventory to find at all (`can_be_seen`): that one passes unconfirmed
  (`"confirmed": false`), since the head camera cannot say where it is;
- the arms: the IoU of the rendered black arm body with the footage's (both: pixels darker than
  `DARK_FRACTION` of the table's brightness), averaged over the keyframes.

An object passes with a mask IoU of at least `MIN_OBJECT_IOU` and a position error within
`MAX_POSITION_ERROR_CM` (or a mask IoU of `CLOSE_MASK_IOU`: big items' centres are estimated less well
than their silhouettes) and, if it is round (the same width from any side), a width in the footage within
`WIDTH_TOLERANCE` of its render's (beyond its scale randomization): two bowls that differ only in size,
swapped, are otherwise a good match. The arms pass with an IoU of `MIN_ARM_IOU`; the scene when all pass.
An overlay image shows the footage with the rendered outlines (objects yellow, arms green) and the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw
from scipy.ndimage import binary_erosion

from datafarm.survey.camera import PinholeCamera, nominal_camera
from datafarm.survey.camera_fit import arm_mask
from datafarm.scene.spec import CupGeometry, CylinderGeometry, SphereGeometry
from datafarm.survey.inventory import can_be_seen, distance_to_placement, match_scene, placement_box

MAX_POSITION_ERROR_CM = 3.0
MIN_OBJECT_IOU = 0.25
MIN_ARM_IOU = 0.5
CLOSE_MASK_IOU = 0.7
WIDTH_TOLERANCE = 0.15  # a round object's width in the footage against its render's (bowls of 15 and 12 cm: 25%)


@dataclass
class GroundingResult:
    report: dict
    overlay: Image.Image

    @property
    def passed(self) -> bool:
        return bool(self.report["passed"])

    def failures(self) -> list[str]:
        out = [f"{name}: {r['reason']}" for name, r in self.report["objects"].items() if not r["passed"]]
        if not self.report["arms"]["passed"]:
            out.append(f"arms: IoU {self.report['arms']['iou']:.2f} < {MIN_ARM_IOU}")
        return out


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else 0.0


def _width_px(mask: np.ndarray) -> int:
    columns = np.flatnonzero(mask.any(axis=0))
    return int(columns[-1] - columns[0] + 1) if len(columns) else 0


def _width_ratio_range(item) -> tuple[float, float] | None:
    """How much wider than its render (at scale 1, where the footage shows it) a round object may look: its
    scale randomization widened by `WIDTH_TOLERANCE`. None for shapes whose width depends on how they are
    turned (a brick, a teapot) and for fixtures."""
    if not isinstance(getattr(item, "geometry", None), (SphereGeometry, CylinderGeometry, CupGeometry)):
        return None
    low, high = item.randomize.scale
    return low * (1 - WIDTH_TOLERANCE), high * (1 + WIDTH_TOLERANCE)


def grounded_placements(spec, positions: dict[str, np.ndarray]):
    """Nominal placements, with every item in `positions` moved there, clamped into its placement range."""
    from datafarm.scene.builder import Placement

    placements = {}
    for item in [*spec.objects, *spec.fixtures]:
        x, y = item.xy
        if item.name in positions:
            low, high = placement_box(item)
            x, y = np.clip(positions[item.name], low, high)
        placements[item.name] = Placement(float(x), float(y), float(item.yaw), 1.0)
    return placements


SHIFT_SEARCH_PX = 16  # how far (image px) a render is slid to meet the footage's silhouette


def _shifted(mask: np.ndarray, shift: tuple[int, int]) -> np.ndarray:
    """`mask` moved by (down, right) pixels, nothing wrapping round."""
    out = np.zeros_like(mask)
    dv, du = shift
    h, w = mask.shape
    out[max(dv, 0): h + min(dv, 0), max(du, 0): w + min(du, 0)] = mask[max(-dv, 0): h - max(dv, 0), max(-du, 0): w - max(du, 0)]
    return out


def _best_shift(rendered: np.ndarray, footage: np.ndarray) -> tuple[int, int]:
    """The image shift (down, right) of the rendered silhouette that overlaps the footage's best. The whole
    silhouette decides, so a part the inventory missed (a drawer front in shadow) does not."""
    if not rendered.any() or not footage.any():
        return 0, 0
    r = SHIFT_SEARCH_PX
    rows, cols = np.nonzero(rendered | footage)
    top, left = max(rows.min() - r, 0), max(cols.min() - r, 0)
    a = rendered[top: rows.max() + r + 1, left: cols.max() + r + 1]
    b = footage[top: rows.max() + r + 1, left: cols.max() + r + 1]
    scores = {(dv, du): _iou(_shifted(a, (dv, du)), b) for dv in range(-r, r + 1) for du in range(-r, r + 1)}
    return max(scores, key=lambda shift: (scores[shift], -abs(shift[0]) - abs(shift[1])))


def _front_point(mask: np.ndarray, camera: PinholeCamera, table_height: float) -> np.ndarray | None:
    """World xy where the mask's lowest image row meets the table below its mean column, or None. (The
    lowest pixel's own column would jump from corner to corner as a square turns.)"""
    v, u = np.nonzero(mask)
    if not len(v):
        return None
    point, hit = camera.on_plane(np.array([[u.mean() + 0.5, v.max() + 1.0]]), table_height)
    return point[0, :2] if hit[0] else None


def _footage_masks(found: dict[str, int], object_masks: dict[int, np.ndarray],
                   rendered: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each found item's pixels in the footage: its inventory blob, joined by the blobs no item claimed
    that lie mostly inside its render (an open drawer's front and its cabinet can come apart in two)."""
    claimed = set(found.values())
    masks = {}
    for name, index in found.items():
        if index not in object_masks:
            continue
        mask = object_masks[index].copy()
        for other, blob in object_masks.items():
            if other not in claimed and (blob & rendered[name]).sum() >= 0.5 * blob.sum():
                mask |= blob
        masks[name] = mask
    return masks


def _render_scene(config, spec, placements, package_dir, keyframes, states):
    """The scene built at `placements` and rendered at each keyframe's joint state: entity ids per item,
    and per keyframe the head frame and the arms' dark-body mask."""
    from datafarm.scene.builder import build_scene
    from datafarm.sim.rig import DualArmRig

    rig = DualArmRig.create(config)
    built = build_scene(rig, spec, placements, package_dir)
    legend = rig.segmentation_legend()
    names = {name: [name] for name in built.objects}
    names.update({name: fixture.entity_names() for name, fixture in built.fixtures.items()})
    ids = {name: [i for i, entity in legend.items() if entity in entities] for name, entities in names.items()}
    arm_ids = rig.entity_ids("left_") + rig.entity_ids("right_")
    table_ids = rig.entity_ids("table")
    renders = []
    for state in states[:len(keyframes)]:
        rig.reset(state)
        frame = rig.capture(["head"])["head"]
        sim_table = np.median(frame.rgb[np.isin(frame.segmentation, table_ids)].max(axis=1)) if table_ids else 150.0
        renders.append((frame, np.isin(frame.segmentation, arm_ids) & arm_mask(frame.rgb, float(sim_table))))
    return ids, renders


def ground_scene_spec(config, spec, package_dir, objects: list[dict], object_masks: dict[int, np.ndarray],
                      keyframes: list[np.ndarray], states: list[np.ndarray], table_brightness: float,
                      gate_arms: bool = True) -> GroundingResult:
    """Render `spec` through the surveyed rig `config` and score it against the footage (module docstring).

    `gate_arms=False` (joints not measured, e.g. a single photo posed at the assumed rest pose): the arm
    IoU is reported but does not decide the result."""
    matches = match_scene(spec, objects)
    found = {name: m["inventory_index"] for name, m in matches.items() if m["found"]}
    surveyed = {name: np.asarray(objects[i]["xy"], dtype=float) for name, i in found.items()}
    placements = grounded_placements(spec, surveyed)
    ids, renders = _render_scene(config, spec, placements, package_dir, keyframes, states)
    # The inventory guesses a centre from a blob without knowing the object's shape (a brick lying along
    # the line of sight, a cabinet with its drawer out); the scene knows the shape. Slide each found item's
    # silhouette to where it overlaps the footage's best, carry that onto the table, and render again:
    # that is where the scene's object stands in the footage.
    camera = nominal_camera(config.cameras["head"])
    rendered_masks = {name: np.isin(renders[0][0].segmentation, ids.get(name, [])) for name in found}
    footage_masks = _footage_masks(found, object_masks, rendered_masks)
    for name, footage in footage_masks.items():
        rendered = rendered_masks[name]
        front = _front_point(rendered, camera, config.table.height)
        shifted = _front_point(_shifted(rendered, _best_shift(rendered, footage)), camera, config.table.height)
        if front is not None and shifted is not None:
            surveyed[name] = np.array([placements[name].x, placements[name].y]) + shifted - front
    refined = grounded_placements(spec, surveyed)
    if any(abs(refined[n].x - placements[n].x) + abs(refined[n].y - placements[n].y) > 1e-3 for n in refined):
        placements = refined
        ids, renders = _render_scene(config, spec, placements, package_dir, keyframes, states)
    arm_scores = [_iou(sim_arms, arm_mask(image, table_brightness)) for image, (_, sim_arms) in zip(keyframes, renders)]
    first = renders[0][0]
    objects_report = {}
    for item in [*spec.objects, *spec.fixtures]:
        if item.support != "table":
            continue
        match = matches[item.name]
        sim_mask = np.isin(first.segmentation, ids.get(item.name, []))
        if not match["found"] and not can_be_seen(sim_mask):
            objects_report[item.name] = {
                "found": False, "iou": None, "position_error_cm": None, "passed": True, "confirmed": False,
                "reason": f"too small for the head camera to show ({int(sim_mask.sum())} px in view): placed as the "
                          "scene says, not confirmed by the footage"}
            continue
        if not match["found"]:
            objects_report[item.name] = {"found": False, "iou": 0.0, "position_error_cm": None, "passed": False,
                                         "reason": "the survey's inventory shows no such object where the scene puts it"}
            continue
        index = match["inventory_index"]
        error_cm = 100 * distance_to_placement(item, surveyed[item.name])
        iou = _iou(sim_mask, footage_masks[item.name]) if item.name in footage_masks else None
        # a big item's centre is estimated less well than its silhouette: a close mask match also passes
        placed = (iou is None or iou >= MIN_OBJECT_IOU) and (
            error_cm <= MAX_POSITION_ERROR_CM or (iou is not None and iou >= CLOSE_MASK_IOU))
        # where two round objects differ only in size (nested bowls, cups), only the size tells them apart
        widths, ratio = _width_ratio_range(item), None
        if widths is not None and item.name in footage_masks and sim_mask.any():
            ratio = _width_px(footage_masks[item.name]) / _width_px(sim_mask)
        sized = ratio is None or widths[0] <= ratio <= widths[1]
        objects_report[item.name] = {
            "found": True, "inventory_label": objects[index]["label"], "iou": None if iou is None else round(iou, 3),
            "position_error_cm": round(error_cm, 2), "surveyed_xy": [round(float(c), 4) for c in surveyed[item.name]],
            "width_ratio": None if ratio is None else round(ratio, 3), "passed": placed and sized, "reason": "ok"}
        if not placed:
            objects_report[item.name]["reason"] = (f"{error_cm:.1f} cm outside its placement range, mask IoU "
                                                   f"{iou if iou is None else round(iou, 2)}")
        elif not sized:
            objects_report[item.name]["reason"] = (f"the footage's object there is {ratio:.2f} times as wide as the "
                                                   f"scene's (allowed {widths[0]:.2f}-{widths[1]:.2f}): another object "
                                                   "stands there")
    arm_iou = float(np.mean(arm_scores))
    report = {"objects": objects_report,
              "arms": {"iou": round(arm_iou, 3), "per_frame": [round(s, 3) for s in arm_scores],
                       "passed": arm_iou >= MIN_ARM_IOU or not gate_arms, "gated": gate_arms},
              "thresholds": {"max_position_error_cm": MAX_POSITION_ERROR_CM, "min_object_iou": MIN_OBJECT_IOU,
                             "min_arm_iou": MIN_ARM_IOU, "width_tolerance": WIDTH_TOLERANCE},
              "matches": matches,
              "placements": {n: [round(p.x, 4), round(p.y, 4)] for n, p in placements.items()},
              "unconfirmed": sorted(n for n, r in objects_report.items() if r.get("confirmed") is False)}
    report["passed"] = all(r["passed"] for r in objects_report.values()) and report["arms"]["passed"]
    return GroundingResult(report, _overlay(keyframes[0], renders[0][1], first.segmentation, ids, report))


def _overlay(image: np.ndarray, sim_arms: np.ndarray, segmentation: np.ndarray, ids: dict[str, list[int]],
             report: dict, scale: int = 2) -> Image.Image:
    canvas = image.astype(np.float32).copy()
    edges = sim_arms & ~binary_erosion(sim_arms)
    canvas[edges] = [40, 230, 60]
    for entity_ids in ids.values():
        mask = np.isin(segmentation, entity_ids)
        canvas[mask & ~binary_erosion(mask)] = [255, 220, 0]
    picture = Image.fromarray(canvas.clip(0, 255).astype(np.uint8)).resize(
        (image.shape[1] * scale, image.shape[0] * scale), Image.Resampling.NEAREST)
    draw = ImageDraw.Draw(picture)
    arms = report["arms"]
    verdict = ("ok" if arms["passed"] else "FAIL") if arms.get("gated", True) else "joints assumed: not gated"
    lines = [f"arms IoU {arms['iou']:.2f} ({verdict})"]
    lines += [f"{name}: too small to see (not confirmed)" if r.get("confirmed") is False else
              f"{name}: {r['position_error_cm'] if r['position_error_cm'] is not None else '-'} cm, IoU {r['iou']} "
              f"({'ok' if r['passed'] else 'FAIL'})" for name, r in report["objects"].items()]
    for row, line in enumerate(lines):
        draw.text((4, 4 + 12 * row), line, fill=(255, 255, 255))
    return picture
