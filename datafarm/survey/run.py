"""The survey of a calibration episode: head camera fitted to the arms, table plane, object inventory,
wrist cameras checked against their mounting. Library code: reads an episode, returns data and images.

Intrinsics: from the episode's metadata (``cameras.<name>.intrinsics``) where present; for a synthetic
recording of this rig, the rig's own; otherwise the rig's nominal field of view as a start and the
focal length fitted with the pose (`datafarm.survey.camera_fit`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw
from scipy.ndimage import binary_dilation

from datafarm.calibration import CalibrationEpisode
from datafarm.geometry import look_at
from datafarm.robot.kinematics import link_poses
from datafarm.sim.config import RigConfig
from datafarm.sim.spaces import arm_slice
from datafarm.survey.arm_points import ArmPoints
from datafarm.survey.camera import PinholeCamera, nominal_camera
from datafarm.survey.camera_fit import CameraFit, _keyframe, alignment_error, arm_mask, fit_camera
from datafarm.survey.inventory import InventoryItem, find_objects_on_table
from datafarm.survey.table import COLOUR_TOLERANCE, TablePlane, survey_table

log = logging.getLogger(__name__)

FIT_KEYFRAMES = 4
MIN_ARM_COVERAGE = 0.3  # a photo's head camera is fitted only when this share of the expected arms is in view
ARM_MARGIN_PX = 6
HEAD = "head"
# Joints the survey cannot trust: footage whose provenance says they were not measured.
_UNMEASURED = ("not measured",)


@dataclass
class SurveyResult:
    cameras: dict[str, dict]
    table: TablePlane
    inventory: list[InventoryItem]
    head_fit: CameraFit
    plate: np.ndarray
    keyframe: np.ndarray
    keyframe_state: np.ndarray
    arm_silhouette: np.ndarray  # (H, W) bool: the fitted arm model over the first fit keyframe
    nominal_silhouette: np.ndarray  # (H, W) bool: the same from the nominal camera
    warnings: list[str] = field(default_factory=list)


def joints_measured(episode: CalibrationEpisode) -> bool:
    return not any(word in str(episode.meta.get("joints", "")) for word in _UNMEASURED)


def is_photo(episode: CalibrationEpisode) -> bool:
    """A one-frame calibration made from a single photo (`datafarm.calibration.photo`)."""
    return episode.meta.get("format") == "photo"


def arms_visible(image: np.ndarray, camera: PinholeCamera, rig: RigConfig, state: np.ndarray,
                 table_value: float, margin_px: int = ARM_MARGIN_PX) -> float:
    """Share of the arm silhouette `camera` expects (the arms posed at `state`) that has arm-coloured
    (dark) pixels within `margin_px`: near 1 when the arms are in view roughly where expected, near 0
    when the photo shows no arms there."""
    expected = rasterise(camera, ArmPoints.from_rig(rig, spacing=0.008).world(state), image.shape[:2])
    if not expected.any():
        return 0.0
    near_dark = binary_dilation(arm_mask(image, table_value), iterations=margin_px)
    return float((expected & near_dark).sum() / expected.sum())


def unfitted(nominal: PinholeCamera, images: list[np.ndarray], states: list[np.ndarray], body: ArmPoints,
             table_value: float, indices: list[int]) -> CameraFit:
    """The nominal pose as the 'fit' (no evaluations), with its alignment error measured for the report."""
    rng = np.random.default_rng(0)
    errors = [alignment_error(nominal, _keyframe(body.world(s, viewpoint=nominal.eye), arm_mask(i, table_value), rng))
              for i, s in zip(images, states)]
    return CameraFit(nominal, nominal, float(np.mean(errors)), float(np.mean(errors)), False, indices, 0, 0.0, errors)


def head_intrinsics(episode: CalibrationEpisode, rig: RigConfig, width: int, height: int) -> tuple[np.ndarray, str, bool]:
    """(K, where it came from, whether the fit should estimate the focal length)."""
    given = episode.meta.get("cameras", {}).get(HEAD, {}).get("intrinsics")
    if given is not None:
        return np.asarray(given, dtype=float), "calibration metadata", False
    nominal = rig.cameras[HEAD].model_copy(update={"width": width, "height": height}).intrinsics()
    if episode.synthetic:
        return nominal, "rig nominal (a synthetic recording of this rig)", False
    if is_photo(episode):  # one frame cannot tell the focal length from the distance: not fitted
        return nominal, "rig nominal (a single photo, assumed taken at the head camera's field of view)", False
    return nominal, "estimated: focal length fitted with the pose", True


def rasterise(camera: PinholeCamera, points: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    uv, front = camera.project(points)
    u, v = np.round(uv[front, 0]).astype(int), np.round(uv[front, 1]).astype(int)
    keep = (u >= 0) & (u < shape[1]) & (v >= 0) & (v < shape[0])
    mask = np.zeros(shape, dtype=bool)
    mask[v[keep], u[keep]] = True
    return mask


def survey_episode(episode: CalibrationEpisode, rig: RigConfig, fit_keyframes: int = FIT_KEYFRAMES) -> SurveyResult:
    frames = episode.frames[HEAD]
    height, width = frames.shape[1:3]
    intrinsics, intrinsics_source, fit_focal = head_intrinsics(episode, rig, width, height)
    nominal = nominal_camera(rig.cameras[HEAD], intrinsics, width, height)
    plate = episode.background_plate(HEAD)
    warnings = []
    indices = episode.keyframe_indices(fit_keyframes)
    states = [episode.state[i] for i in indices]
    images = [frames[i] for i in indices]
    body = ArmPoints.from_rig(rig)
    first_table = survey_table(plate, nominal, rig)
    photo = is_photo(episode)
    visible = arms_visible(images[0], nominal, rig, states[0], first_table.brightness) if photo else None
    if photo:
        warnings.append(f"single photo: the joints are {episode.meta.get('joints')!r}; the wrist cameras "
                        f"{episode.meta.get('cameras_absent')} are absent (they keep the rig's mounting, and the "
                        "renderer takes the photo's colours as their real references)")
    if visible is not None and visible < MIN_ARM_COVERAGE:
        warnings.append(f"single photo: the arms are not visible where the rig's nominal head camera expects them "
                        f"(arm-coloured share of the expected silhouette {visible:.2f} < {MIN_ARM_COVERAGE}); the "
                        "head camera keeps the rig's nominal pose, not fitted")
        fit = unfitted(nominal, images, states, body, first_table.brightness, indices)
    else:
        fit = fit_camera(nominal, images, states, body, first_table.brightness, fit_focal=fit_focal, frames=indices)
    if not joints_measured(episode):
        warnings.append("the calibration's joint states were not measured (provenance: "
                        f"{episode.meta.get('joints')!r}): the arm model is posed at those values, so the head "
                        "camera fit is unreliable; record a calibration with joint states for a real fit")
    camera = fit.camera
    if fit.error_after_px > fit.error_before_px:
        warnings.append("the camera fit did not improve on the nominal pose; the nominal pose is kept")
        camera = nominal
    table = survey_table(plate, camera, rig)
    whole = ArmPoints.from_rig(rig, colors=("body", "accent"), spacing=0.008)
    silhouettes = [rasterise(camera, whole.world(state), (height, width)) for state in states]
    # arm-dark pixels count as arm only near where the model puts an arm (a shaded drawer front is dark
    # too), unless the joints were not measured: then the model may be far from the arms
    dark, modelled = arm_mask(plate, table.brightness), np.logical_or.reduce(silhouettes)
    arms = modelled | (dark & binary_dilation(modelled, iterations=ARM_MARGIN_PX) if joints_measured(episode) else dark)
    inventory = find_objects_on_table(plate, table.mask, table.colour, camera, table.height, arms,
                                      np.array([rig.arms[side].xyz[:2] for side in rig.arms]), shade=dark)
    fitted = camera is fit.camera and fit.evaluations > 0
    cameras = {HEAD: _camera_entry(camera, rig, width, height, intrinsics_source,
                                   "fitted to the arm silhouettes" if fitted else "rig nominal",
                                   {**fit.report(), "arm_coverage": None if visible is None else round(visible, 3)})}
    for name in episode.cameras:
        if name != HEAD:
            cameras[name] = _wrist_entry(episode, rig, name, table, indices)
    nominal_silhouette = rasterise(nominal, whole.world(states[0]), (height, width))
    return SurveyResult(cameras, table, inventory, fit, plate, images[0], states[0], silhouettes[0],
                        nominal_silhouette, warnings)


def _camera_entry(camera: PinholeCamera, rig: RigConfig, width: int, height: int, intrinsics_source: str,
                  pose_source: str, fit: dict) -> dict:
    spec = rig.cameras[HEAD]
    distance = float(np.linalg.norm(np.subtract(spec.target, spec.eye)))
    return {"width": int(width), "height": int(height), "mount": spec.mount,
            "intrinsics": np.asarray(camera.intrinsics).round(4).tolist(), **camera.look_at_parameters(distance),
            "source": pose_source, "intrinsics_source": intrinsics_source, "fit": fit}


def wrist_camera(rig: RigConfig, name: str, state: np.ndarray, intrinsics: np.ndarray, width: int,
                 height: int, arm_points: ArmPoints) -> PinholeCamera:
    """A wrist camera's world pose from its mounting and the arm's forward kinematics."""
    spec = rig.cameras[name]
    side, link = spec.mount.split("/", 1)
    poses = link_poses(arm_points.model, arm_points.joint_values(state[arm_slice(side)]))
    pose = arm_points.mounts[side] @ poses[link] @ look_at(spec.eye, spec.target, spec.up)
    return PinholeCamera(pose, intrinsics, width, height)


def table_agreement(image: np.ndarray, camera: PinholeCamera, table: TablePlane) -> float:
    """IoU between where a camera should see the table (its pose, the plane, the extent) and the pixels
    of the table's colour: the wrist cameras' mounting check."""
    h, w = image.shape[:2]
    v, u = np.mgrid[0:h, 0:w]
    points, hit = camera.on_plane(np.stack([u.ravel() + 0.5, v.ravel() + 0.5], axis=1), table.height)
    e = table.extent
    if e["x_min"] is None:
        return 0.0
    predicted = hit & (points[:, 0] >= e["x_min"]) & (points[:, 0] <= e["x_max"]) & \
        (points[:, 1] >= e["y_min"]) & (points[:, 1] <= e["y_max"])
    observed = (np.linalg.norm(image.astype(np.float32) - table.colour, axis=2) < COLOUR_TOLERANCE).ravel()
    union = (predicted | observed).sum()
    return float((predicted & observed).sum() / union) if union else 0.0


def _wrist_entry(episode: CalibrationEpisode, rig: RigConfig, name: str, table: TablePlane, indices: list[int]) -> dict:
    frames = episode.frames[name]
    height, width = frames.shape[1:3]
    spec = rig.cameras[name].model_copy(update={"width": width, "height": height})
    given = episode.meta.get("cameras", {}).get(name, {}).get("intrinsics")
    intrinsics = np.asarray(given, dtype=float) if given is not None else spec.intrinsics()
    points = ArmPoints.from_rig(rig)
    scores = [table_agreement(frames[i], wrist_camera(rig, name, episode.state[i], intrinsics, width, height, points), table)
              for i in indices]
    return {"width": int(width), "height": int(height), "mount": spec.mount, "intrinsics": intrinsics.round(4).tolist(),
            "eye": list(spec.eye), "target": list(spec.target), "up": list(spec.up),
            "source": "rig mounting (checked, not fitted)",
            "intrinsics_source": "calibration metadata" if given is not None else "rig nominal",
            "mount_check": {"method": "IoU of the predicted table region with the table-coloured pixels",
                            "table_iou": round(float(np.mean(scores)), 3),
                            "per_frame": [round(s, 3) for s in scores], "frames": indices}}


def overlay_image(result: SurveyResult, scale: int = 2) -> Image.Image:
    """The head keyframe with the fitted arm model (green), the nominal one (red), the table region
    (blue tint) and the labelled inventory boxes."""
    frame = result.keyframe.astype(np.float32).copy()
    tint = result.table.mask
    frame[tint] = frame[tint] * 0.8 + np.array([40, 60, 160]) * 0.2
    frame[result.nominal_silhouette] = frame[result.nominal_silhouette] * 0.5 + np.array([230, 40, 40]) * 0.5
    frame[result.arm_silhouette] = frame[result.arm_silhouette] * 0.4 + np.array([40, 220, 60]) * 0.6
    image = Image.fromarray(frame.clip(0, 255).astype(np.uint8)).resize(
        (frame.shape[1] * scale, frame.shape[0] * scale), Image.Resampling.NEAREST)
    draw = ImageDraw.Draw(image)
    for index, item in enumerate(result.inventory):
        left, top, right, bottom = (c * scale for c in item.bbox)
        draw.rectangle([left, top, right, bottom], outline=(255, 220, 0), width=2)
        draw.text((left, max(top - 12, 0)), f"{index}: {item.label} ({item.xy[0]:+.2f}, {item.xy[1]:+.2f})",
                  fill=(255, 255, 0))
    fit = result.head_fit
    draw.text((4, 4), f"arm alignment {fit.error_before_px:.1f} px (nominal) -> {fit.error_after_px:.1f} px (fitted)",
              fill=(255, 255, 255))
    return image


def rig_with_surveyed_cameras(rig: RigConfig, cameras: dict[str, dict]) -> RigConfig:
    """`rig` with the cameras a survey recorded (size, field of view, pose)."""
    updated = dict(rig.cameras)
    for name, camera in cameras.items():
        fy = camera["intrinsics"][1][1]
        updated[name] = rig.cameras[name].model_copy(update={
            "width": camera["width"], "height": camera["height"],
            "fovy_deg": float(np.rad2deg(2 * np.arctan(camera["height"] / 2 / fy))),
            "eye": tuple(camera["eye"]), "target": tuple(camera["target"]),
            "up": tuple(camera.get("up", rig.cameras[name].up))})
    return rig.model_copy(update={"cameras": updated})
