"""Small rigid-body helpers: rotations, homogeneous transforms, camera look-at frames."""

from __future__ import annotations

import numpy as np

# Quaternion (w, x, y, z) turning SAPIEN's x-aligned primitives and joint axes (cylinders, capsules,
# planes, prismatic joints) so they run along z.
X_TO_Z = (0.7071068, 0.0, -0.7071068, 0.0)


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF convention: R = Rz(yaw) @ Ry(pitch) @ Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_to_rpy(m: np.ndarray) -> np.ndarray:
    """Inverse of rpy_to_matrix (pitch in [-pi/2, pi/2])."""
    pitch = np.arcsin(-np.clip(m[2, 0], -1.0, 1.0))
    if abs(np.cos(pitch)) < 1e-9:  # gimbal lock: fold yaw into roll
        return np.array([np.arctan2(-m[1, 2], m[1, 1]), pitch, 0.0])
    return np.array([np.arctan2(m[2, 1], m[2, 2]), pitch, np.arctan2(m[1, 0], m[0, 0])])


def transform(xyz, rpy=(0.0, 0.0, 0.0)) -> np.ndarray:
    """4x4 homogeneous transform from a translation and URDF rpy."""
    t = np.eye(4)
    t[:3, :3] = rpy_to_matrix(rpy)
    t[:3, 3] = xyz
    return t


def matrix_to_quat_wxyz(m: np.ndarray) -> np.ndarray:
    """Rotation matrix to a unit quaternion (w, x, y, z), the order SAPIEN uses."""
    w = np.sqrt(max(0.0, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    x = np.sqrt(max(0.0, 1.0 + m[0, 0] - m[1, 1] - m[2, 2])) / 2
    y = np.sqrt(max(0.0, 1.0 - m[0, 0] + m[1, 1] - m[2, 2])) / 2
    z = np.sqrt(max(0.0, 1.0 - m[0, 0] - m[1, 1] + m[2, 2])) / 2
    x = np.copysign(x, m[2, 1] - m[1, 2])
    y = np.copysign(y, m[0, 2] - m[2, 0])
    z = np.copysign(z, m[1, 0] - m[0, 1])
    q = np.array([w, x, y, z])
    return q / np.linalg.norm(q)


def quat_wxyz_to_matrix(q) -> np.ndarray:
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def rotation_angle(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) of the rotation taking a to b."""
    cos = (np.trace(a.T @ b) - 1.0) / 2.0
    return float(np.arccos(np.clip(cos, -1.0, 1.0)))


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """Camera pose (4x4) in SAPIEN's camera convention: x forward, y left, z up."""
    eye, target, up = (np.asarray(v, dtype=float) for v in (eye, target, up))
    forward = target - eye
    forward /= np.linalg.norm(forward)
    left = np.cross(up, forward)
    if np.linalg.norm(left) < 1e-9:
        raise ValueError(f"camera up {up.tolist()} is parallel to its viewing direction")
    left /= np.linalg.norm(left)
    true_up = np.cross(forward, left)
    t = np.eye(4)
    t[:3, 0], t[:3, 1], t[:3, 2], t[:3, 3] = forward, left, true_up, eye
    return t
