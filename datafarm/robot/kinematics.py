"""Forward kinematics of the arm model in plain numpy (no simulator needed)."""

from __future__ import annotations

import numpy as np

from datafarm.geometry import transform
from datafarm.robot.config import ArmModel


def _joint_motion(axis, kind: str, q: float) -> np.ndarray:
    axis = np.asarray(axis, dtype=float)
    motion = np.eye(4)
    if kind == "revolute":
        k = axis / np.linalg.norm(axis)
        skew = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        motion[:3, :3] = np.eye(3) + np.sin(q) * skew + (1 - np.cos(q)) * skew @ skew
    elif kind == "prismatic":
        motion[:3, 3] = axis * q
    return motion


def link_poses(model: ArmModel, qpos: dict[str, float] | np.ndarray) -> dict[str, np.ndarray]:
    """Pose (4x4, base frame) of every link. `qpos` is six arm joint values or a name->value map."""
    if not isinstance(qpos, dict):
        qpos = dict(zip((j.name for j in model.arm_joints), np.asarray(qpos, dtype=float)))
    poses = {model.base_link: np.eye(4)}
    for joint in model.joints:  # listed parent-first
        motion = _joint_motion(joint.axis, joint.type, qpos.get(joint.name, 0.0))
        poses[joint.child] = poses[joint.parent] @ transform(joint.xyz, joint.rpy) @ motion
    return poses


def flange_pose(model: ArmModel, q) -> np.ndarray:
    """Pose of the flange (link6) in the arm's base frame for six joint values."""
    return link_poses(model, q)[model.flange_link]
