"""The arm model as surface points in the world, posed by forward kinematics of recorded joint states.

The arm's primitive shapes (configs/robot/<name>.yaml) are sampled on their surfaces in their link
frames once; `ArmPoints.world(state)` places them with `datafarm.robot.kinematics.link_poses` and the
rig's arm mounts. Only shapes of the model's *body* colour are sampled by default: the real PiPER's
body is black, which is what the survey can tell apart from a grey table by colour; its light accent
parts are not (see datafarm.survey.camera_fit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datafarm.geometry import rpy_to_matrix
from datafarm.robot.config import ArmModel, ShapeSpec, load_arm_model
from datafarm.robot.kinematics import link_poses
from datafarm.sim.config import RigConfig
from datafarm.sim.spaces import JOINTS_PER_ARM, SIDES, arm_slice


def _circle(radius: float, spacing: float) -> np.ndarray:
    count = max(8, int(np.ceil(2 * np.pi * radius / spacing)))
    angles = np.linspace(0, 2 * np.pi, count, endpoint=False)
    return np.stack([np.cos(angles), np.sin(angles)], axis=1) * radius


def shape_surface_points(shape: ShapeSpec, spacing: float = 0.006) -> np.ndarray:
    """Points (N, 3) on the surface of one primitive, in its link frame (cylinders/capsules along x)."""
    if shape.kind == "box":
        half = np.asarray(shape.half_size)
        faces = []
        for axis in range(3):
            others = [a for a in range(3) if a != axis]
            grids = [np.linspace(-half[a], half[a], max(2, int(np.ceil(2 * half[a] / spacing)) + 1)) for a in others]
            a, b = np.meshgrid(*grids, indexing="ij")
            for sign in (-1, 1):
                face = np.zeros((a.size, 3))
                face[:, others[0]], face[:, others[1]], face[:, axis] = a.ravel(), b.ravel(), sign * half[axis]
                faces.append(face)
        local = np.concatenate(faces)
    else:
        ring = _circle(shape.radius, spacing)
        xs = np.linspace(-shape.half_length, shape.half_length, max(2, int(np.ceil(2 * shape.half_length / spacing)) + 1))
        side = np.concatenate([np.column_stack([np.full(len(ring), x), ring]) for x in xs])
        caps = []
        for sign in (-1, 1):
            if shape.kind == "cylinder":  # flat discs
                for r in np.arange(spacing, shape.radius, spacing):
                    disc = _circle(r, spacing)
                    caps.append(np.column_stack([np.full(len(disc), sign * shape.half_length), disc]))
            else:  # hemispheres
                for theta in np.linspace(0, np.pi / 2, max(3, int(np.ceil(np.pi / 2 * shape.radius / spacing)))):
                    circle = _circle(shape.radius * np.cos(theta), spacing) if np.cos(theta) > 1e-6 else np.zeros((1, 2))
                    x = sign * (shape.half_length + shape.radius * np.sin(theta))
                    caps.append(np.column_stack([np.full(len(circle), x), circle]))
        local = np.concatenate([side, *caps])
    return local @ rpy_to_matrix(shape.rpy).T + np.asarray(shape.xyz)


def inside_shape(shape: ShapeSpec, points: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """Which points (N, 3, in the shape's link frame) lie inside the primitive grown by `margin`."""
    local = (np.asarray(points) - np.asarray(shape.xyz)) @ rpy_to_matrix(shape.rpy)
    if shape.kind == "box":
        return np.all(np.abs(local) <= np.asarray(shape.half_size) + margin, axis=1)
    radial = np.linalg.norm(local[:, 1:], axis=1)
    along = np.abs(local[:, 0])
    if shape.kind == "cylinder":
        return (radial <= shape.radius + margin) & (along <= shape.half_length + margin)
    beyond = np.maximum(along - shape.half_length, 0.0)  # capsule: distance to its segment
    return np.hypot(radial, beyond) <= shape.radius + margin


@dataclass
class ArmPoints:
    """Surface points of both arms' links, ready to be posed for any 14-D joint state."""

    model: ArmModel
    mounts: dict[str, np.ndarray]  # side -> (4, 4) arm base in the world
    link_points: dict[str, np.ndarray]  # link name -> (N, 3) in the link frame
    hiders: dict[str, tuple[ShapeSpec, ...]]  # link name -> shapes not sampled, which hide what is inside them

    @classmethod
    def from_rig(cls, rig: RigConfig, colors: tuple[str, ...] = ("body",), spacing: float = 0.01) -> ArmPoints:
        model = load_arm_model(rig.robot)
        link_points, hiders = {}, {}
        for link, shapes in model.shapes.items():
            chosen = [shape_surface_points(s, spacing) for s in shapes if s.color in colors]
            if chosen:
                link_points[link] = np.concatenate(chosen)
            others = tuple(s for s in shapes if s.color not in colors)
            if others:
                hiders[link] = others
        return cls(model, {side: rig.arms[side].matrix() for side in SIDES}, link_points, hiders)

    def joint_values(self, arm_state: np.ndarray) -> dict[str, float]:
        """Six joints and the gripper opening -> every moving joint of the model (fingers get half each)."""
        values = {j.name: float(q) for j, q in zip(self.model.arm_joints, arm_state[:JOINTS_PER_ARM])}
        half = float(arm_state[JOINTS_PER_ARM]) / 2
        first, second = self.model.finger_joints  # as datafarm.sim.rig.Arm drives them: +half, -half
        values[first.name], values[second.name] = half, -half
        return values

    def world(self, state: np.ndarray, sides: tuple[str, ...] = SIDES, viewpoint=None,
              occluder_reach: float = 0.15) -> np.ndarray:
        """The sampled points (N, 3) in the world for one 14-D joint state, less those inside an unsampled
        part; with a `viewpoint` (a camera centre), also less those an unsampled part hides from it
        (checked along the first `occluder_reach` metres of the line of sight)."""
        state = np.asarray(state, dtype=float)
        parts = []
        for side in sides:
            poses = {link: self.mounts[side] @ pose
                     for link, pose in link_poses(self.model, self.joint_values(state[arm_slice(side)])).items()}
            points = np.concatenate([local @ poses[link][:3, :3].T + poses[link][:3, 3]
                                     for link, local in self.link_points.items()])
            hidden = self._hidden(points, poses)  # a point inside an unsampled part is never seen
            if viewpoint is not None:
                sight = np.asarray(viewpoint, dtype=float) - points
                sight /= np.linalg.norm(sight, axis=1, keepdims=True)
                for step in np.arange(0.01, occluder_reach, 0.01):
                    hidden |= self._hidden(points + step * sight, poses)
            parts.append(points[~hidden])
        return np.concatenate(parts)

    def _hidden(self, points: np.ndarray, poses: dict[str, np.ndarray]) -> np.ndarray:
        hidden = np.zeros(len(points), dtype=bool)
        for link, shapes in self.hiders.items():
            in_link = (points - poses[link][:3, 3]) @ poses[link][:3, :3]
            for shape in shapes:
                hidden |= inside_shape(shape, in_link, margin=0.002)
        return hidden

    def link_origins(self, state: np.ndarray) -> np.ndarray:
        """World positions (M, 3) of every link frame of both arms: keypoints for reprojection errors."""
        state = np.asarray(state, dtype=float)
        origins = []
        for side in SIDES:
            poses = link_poses(self.model, self.joint_values(state[arm_slice(side)]))
            origins.extend((self.mounts[side] @ pose)[:3, 3] for pose in poses.values())
        return np.array(origins)
