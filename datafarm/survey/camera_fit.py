"""Fit the head camera's pose to the footage: the arms are in view and their joint states are recorded.

Method (silhouette chamfer alignment; no rendering inside the loop):

1. Arm mask per keyframe: the PiPER's body is black, so the image's arm pixels are those darker than
   `dark_fraction` of the table's brightness (the table sample from `datafarm.survey.table`). Light
   accent parts look like the table and are left out on both sides: the model is sampled only on its
   body-coloured shapes (`ArmPoints.from_rig`).
2. Model per keyframe: surface points of both arms posed by forward kinematics of that frame's joint
   state and the rig's arm mounts (world frame), computed once; points inside a light part, or hidden
   behind one as seen from the nominal camera centre, are dropped.
3. Cost for a camera pose: the two-sided chamfer distance in pixels between the projected model points
   and the mask: (a) each projected point's distance to the nearest mask pixel (a distance transform,
   sampled bilinearly), (b) each mask pixel's distance to the nearest projected point (a k-d tree).
   (a) alone would let the arm shrink inside the mask, (b) alone would let it grow; together they
   have their minimum where the silhouettes coincide. Distances are capped (outliers: dark objects,
   shadows, parts hidden behind the light accents).
4. Optimise 6 parameters (a translation of the camera centre and a rotation vector about it, world
   frame) from the rig's nominal pose with scipy's trust-region least squares and a soft-L1 loss,
   coarse (large cap) then fine. With no intrinsics in the metadata, a 7th parameter scales the focal
   length (the principal point stays at the image centre).

The reported alignment error is the mean of (a) and (b) with distances capped at `REPORT_CAP_PX`,
before (nominal pose) and after the fit. On footage whose joint states are not measured (the
RoboMIND clips carry none) the model is posed at the rest pose and the error stays large: the
survey says so rather than trusting the fit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import distance_transform_edt, map_coordinates
from scipy.optimize import least_squares
from scipy.spatial import cKDTree

from datafarm.survey.arm_points import ArmPoints
from datafarm.survey.camera import PinholeCamera

log = logging.getLogger(__name__)

REPORT_CAP_PX = 50.0
DARK_FRACTION = 0.72  # arm pixels are darker than this share of the table's brightness
MAX_TRANSLATION_M = 0.3  # the fit stays within this of the nominal pose (and MAX_ROTATION_RAD)
MAX_ROTATION_RAD = 0.5
_STAGES = ((30.0, 4.0), (10.0, 1.5))  # (distance cap px, soft-L1 scale px), coarse to fine
_MODEL_SAMPLES = 2500  # projected points per keyframe in term (a)
_MASK_SAMPLES = 1500  # mask pixels per keyframe in term (b)


def arm_mask(image: np.ndarray, table_value: float, dark_fraction: float = DARK_FRACTION) -> np.ndarray:
    """Pixels of the black arm body: (H, W) bool."""
    return image.max(axis=2).astype(np.float32) < dark_fraction * table_value


@dataclass
class _Keyframe:
    points: np.ndarray  # (N, 3) world model points
    sampled: np.ndarray  # (n, 3) subsample for term (a)
    mask_pixels: np.ndarray  # (m, 2) u, v of mask pixels for term (b)
    distance: np.ndarray  # (H, W) distance (px) to the nearest mask pixel


@dataclass
class CameraFit:
    """The fitted camera and how well the arm model aligns with the footage before and after."""

    camera: PinholeCamera
    nominal: PinholeCamera
    error_before_px: float
    error_after_px: float
    fitted_focal: bool
    frames: list[int]
    evaluations: int
    seconds: float
    per_frame_after_px: list[float] = field(default_factory=list)

    def report(self) -> dict:
        moved, turned = self.camera.pose_error(self.nominal)
        return {"method": "arm silhouette chamfer (FK of the recorded joint states, body-coloured shapes)",
                "frames": self.frames, "alignment_px_before": round(self.error_before_px, 2),
                "alignment_px_after": round(self.error_after_px, 2),
                "alignment_px_per_frame": [round(e, 2) for e in self.per_frame_after_px],
                "moved_from_nominal_m": round(moved, 4), "turned_from_nominal_deg": round(turned, 3),
                "focal_fitted": self.fitted_focal, "focal_px": round(float(self.camera.intrinsics[0, 0]), 2),
                "evaluations": self.evaluations, "seconds": round(self.seconds, 2)}


def _subsample(array: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    return array if len(array) <= count else array[rng.choice(len(array), count, replace=False)]


def _keyframe(points: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> _Keyframe:
    v, u = np.nonzero(mask)
    pixels = np.stack([u, v], axis=1).astype(float)
    distance = distance_transform_edt(~mask) if mask.any() else np.full(mask.shape, REPORT_CAP_PX)
    return _Keyframe(points, _subsample(points, _MODEL_SAMPLES, rng), _subsample(pixels, _MASK_SAMPLES, rng),
                     distance.astype(np.float32))


def _terms(camera: PinholeCamera, frame: _Keyframe, cap: float, sampled: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(a) model-to-mask and (b) mask-to-model distances in pixels, each capped at `cap`."""
    height, width = frame.distance.shape
    uv, front = camera.project(frame.sampled if sampled else frame.points)
    inside = front & (uv[:, 0] >= 0) & (uv[:, 0] <= width - 1) & (uv[:, 1] >= 0) & (uv[:, 1] <= height - 1)
    a = np.full(len(uv), cap)
    if inside.any():
        a[inside] = np.minimum(map_coordinates(frame.distance, [uv[inside, 1], uv[inside, 0]], order=1), cap)
    b = np.full(len(frame.mask_pixels), cap)
    everything, front_all = camera.project(frame.points)
    visible = everything[front_all]
    if len(visible) and len(b):
        b = np.minimum(cKDTree(visible).query(frame.mask_pixels, distance_upper_bound=cap)[0], cap)
    return a, b


def alignment_error(camera: PinholeCamera, frame: _Keyframe, cap: float = REPORT_CAP_PX) -> float:
    a, b = _terms(camera, frame, cap, sampled=False)
    return float((a.mean() + b.mean()) / 2) if len(b) else float(a.mean())


def _camera_of(nominal: PinholeCamera, x: np.ndarray) -> PinholeCamera:
    camera = nominal.perturbed(x[:3], x[3:6])
    return camera.with_focal(nominal.intrinsics[0, 0] * float(np.exp(x[6]))) if len(x) > 6 else camera


def fit_camera(nominal: PinholeCamera, images: list[np.ndarray], states: list[np.ndarray], model: ArmPoints,
               table_value: float, fit_focal: bool = False, frames: list[int] | None = None,
               seed: int = 0) -> CameraFit:
    """Fit the pose (and with `fit_focal` the focal length) of a world-mounted camera; see the module docstring."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    keyframes = [_keyframe(model.world(state, viewpoint=nominal.eye), arm_mask(image, table_value), rng)
                 for image, state in zip(images, states)]
    count = [0]

    def residuals(x: np.ndarray, cap: float) -> np.ndarray:
        count[0] += 1
        camera = _camera_of(nominal, x)
        parts = []
        for frame in keyframes:
            a, b = _terms(camera, frame, cap)
            parts += [a / np.sqrt(len(a)), b / np.sqrt(max(len(b), 1))]
        return np.concatenate(parts)

    x = np.zeros(7 if fit_focal else 6)
    upper = np.array([MAX_TRANSLATION_M] * 3 + [MAX_ROTATION_RAD] * 3 + ([np.log(1.6)] if fit_focal else []))
    for cap, scale in _STAGES:
        result = least_squares(residuals, x, args=(cap,), bounds=(-upper, upper), loss="soft_l1",
                               f_scale=scale / np.sqrt(_MODEL_SAMPLES), diff_step=1e-3, x_scale=0.01,
                               max_nfev=60)
        x = result.x
    camera = _camera_of(nominal, x)
    before = float(np.mean([alignment_error(nominal, f) for f in keyframes]))
    per_frame = [alignment_error(camera, f) for f in keyframes]
    fit = CameraFit(camera, nominal, before, float(np.mean(per_frame)), fit_focal,
                    list(frames if frames is not None else range(len(images))), count[0],
                    time.perf_counter() - started, per_frame)
    log.info("camera fit: alignment %.2f px -> %.2f px in %d evaluations, %.1f s", fit.error_before_px,
             fit.error_after_px, fit.evaluations, fit.seconds)
    return fit


def reprojection_error_px(fitted: PinholeCamera, truth: PinholeCamera, model: ArmPoints,
                          states: list[np.ndarray]) -> float:
    """RMS pixel distance between the arm's link origins projected by two cameras (known truth only)."""
    errors = []
    for state in states:
        origins = model.link_origins(state)
        a, _ = fitted.project(origins)
        b, _ = truth.project(origins)
        errors.append(np.linalg.norm(a - b, axis=1))
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))
