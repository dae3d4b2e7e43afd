"""A pinhole camera for the survey: project world points, cast pixel rays onto the table plane.

Poses are SAPIEN camera poses (camera-to-world, x forward, y left, z up: `datafarm.geometry.look_at`);
pixels follow OpenCV (u right, v down, principal point from the intrinsics), as SAPIEN's own
`get_intrinsic_matrix` and `get_extrinsic_matrix` do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datafarm.geometry import look_at, rotation_angle

# SAPIEN camera axes (forward, left, up) -> OpenCV camera axes (right, down, forward).
CV_FROM_SAPIEN = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])


def rotation_vector_matrix(w: np.ndarray) -> np.ndarray:
    """Rodrigues: the rotation by |w| rad about w."""
    angle = float(np.linalg.norm(w))
    if angle < 1e-12:
        return np.eye(3)
    k = np.asarray(w, dtype=float) / angle
    skew = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * skew + (1 - np.cos(angle)) * skew @ skew


@dataclass(frozen=True)
class PinholeCamera:
    pose: np.ndarray  # (4, 4) camera-to-world, SAPIEN axes
    intrinsics: np.ndarray  # (3, 3)
    width: int
    height: int

    @classmethod
    def look_at(cls, eye, target, up, intrinsics, width: int, height: int) -> PinholeCamera:
        return cls(look_at(eye, target, up), np.asarray(intrinsics, dtype=float), int(width), int(height))

    @property
    def eye(self) -> np.ndarray:
        return self.pose[:3, 3]

    def look_at_parameters(self, distance: float = 1.0) -> dict[str, list[float]]:
        """eye, target and up (the rig config's camera fields) that give exactly this pose."""
        forward, up = self.pose[:3, 0], self.pose[:3, 2]
        return {"eye": self.eye.round(5).tolist(), "target": (self.eye + distance * forward).round(5).tolist(),
                "up": up.round(5).tolist()}

    def perturbed(self, translation, rotation_vector) -> PinholeCamera:
        """This camera moved by `translation` (m, world) and turned by `rotation_vector` (rad, world)."""
        pose = self.pose.copy()
        pose[:3, :3] = rotation_vector_matrix(np.asarray(rotation_vector, dtype=float)) @ self.pose[:3, :3]
        pose[:3, 3] = self.pose[:3, 3] + np.asarray(translation, dtype=float)
        return PinholeCamera(pose, self.intrinsics, self.width, self.height)

    def with_focal(self, focal: float) -> PinholeCamera:
        k = self.intrinsics.copy()
        k[0, 0] = k[1, 1] = focal
        return PinholeCamera(self.pose, k, self.width, self.height)

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """World points (N, 3) in OpenCV camera coordinates (z: depth along the optical axis)."""
        rotation, eye = self.pose[:3, :3], self.pose[:3, 3]
        return (np.asarray(points) - eye) @ rotation @ CV_FROM_SAPIEN.T

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (N, 2) of world points, and whether each lies in front of the camera."""
        camera = self.to_camera(points)
        depth = camera[:, 2]
        front = depth > 1e-3
        safe = np.where(front, depth, 1.0)
        k = self.intrinsics
        uv = np.stack([k[0, 0] * camera[:, 0] / safe + k[0, 2], k[1, 1] * camera[:, 1] / safe + k[1, 2]], axis=1)
        return uv, front

    def rays(self, uv: np.ndarray) -> np.ndarray:
        """World directions (N, 3) of the rays through pixel coordinates `uv` (not normalised)."""
        k = self.intrinsics
        uv = np.asarray(uv, dtype=float)
        camera = np.stack([(uv[:, 0] - k[0, 2]) / k[0, 0], (uv[:, 1] - k[1, 2]) / k[1, 1], np.ones(len(uv))], axis=1)
        return camera @ CV_FROM_SAPIEN @ self.pose[:3, :3].T

    def on_plane(self, uv: np.ndarray, height: float) -> tuple[np.ndarray, np.ndarray]:
        """Where the rays through `uv` meet the horizontal plane z = height: (N, 3) points and a hit mask."""
        directions = self.rays(uv)
        dz = directions[:, 2]
        hit = dz < -1e-9  # only rays going down reach a plane below the camera
        scale = np.where(hit, (height - self.eye[2]) / np.where(hit, dz, -1.0), 0.0)
        hit &= scale > 0
        return self.eye + directions * scale[:, None], hit

    def pose_error(self, other: PinholeCamera) -> tuple[float, float]:
        """(position error in m, rotation error in degrees) between two camera poses."""
        return (float(np.linalg.norm(self.eye - other.eye)),
                float(np.rad2deg(rotation_angle(self.pose[:3, :3], other.pose[:3, :3]))))


def nominal_camera(spec, intrinsics=None, width: int | None = None, height: int | None = None) -> PinholeCamera:
    """The rig config's camera (a `CameraSpec` mounted on the world) as a PinholeCamera."""
    width, height = width or spec.width, height or spec.height
    if intrinsics is None:
        intrinsics = spec.model_copy(update={"width": width, "height": height}).intrinsics()
    return PinholeCamera.look_at(spec.eye, spec.target, spec.up, intrinsics, width, height)
