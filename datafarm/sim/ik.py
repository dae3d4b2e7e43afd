"""Inverse kinematics of one arm of the rig, on SAPIEN's built-in pinocchio model.

Pinocchio's CLIK ignores joint limits, so every solution is wrapped by 2*pi towards the seed and
checked against the limits; several seeds are tried and the solution nearest the first is kept.
Failure raises `IKError`, never a sentinel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datafarm.geometry import rotation_angle
from datafarm.sim.rig import Arm, DualArmRig, pose_matrix, sapien_pose

POSITION_TOLERANCE = 1e-3  # m
ANGLE_TOLERANCE = np.deg2rad(0.5)


class IKError(RuntimeError):
    """No joint configuration within limits reaches the target pose."""

    def __init__(self, side: str, target: np.ndarray, detail: str):
        self.side = side
        self.target = target
        super().__init__(f"{side} arm cannot reach TCP position {np.round(target[:3, 3], 3).tolist()}: {detail}")


@dataclass(frozen=True)
class IKSolution:
    qpos: np.ndarray  # (6,) joint angles, within limits
    position_error: float  # m
    angle_error: float  # rad


class ArmIK:
    """IK and FK for the TCP of one arm, in world coordinates. Build with `ArmIK.for_arm`."""

    def __init__(self, side: str, arm: Arm, pinocchio_model, base_pose: np.ndarray, tcp_offset: np.ndarray,
                 flange_index: int):
        self.side = side
        self.arm = arm
        self.model = pinocchio_model
        self.base_pose = base_pose
        self.tcp_offset = tcp_offset
        self.flange_index = flange_index
        self.lower = arm.lower[:6]
        self.upper = arm.upper[:6]

    @classmethod
    def for_arm(cls, rig: DualArmRig, side: str) -> ArmIK:
        arm = rig.arms[side]
        flange_name = f"{side}_{rig.model.flange_link}"
        index = [link.name for link in arm.articulation.links].index(flange_name)
        offset = np.eye(4)
        offset[:3, 3] = rig.model.tcp_offset
        return cls(side, arm, arm.articulation.create_pinocchio_model(),
                   pose_matrix(arm.articulation.get_root_pose()), offset, index)

    def fk(self, q6) -> np.ndarray:
        """World TCP pose (4x4) for six joint angles."""
        q = np.zeros(8)
        q[:6] = q6
        self.model.compute_forward_kinematics(q)
        flange = pose_matrix(self.model.get_link_pose(self.flange_index))
        return self.base_pose @ flange @ self.tcp_offset

    def _wrap_towards(self, q: np.ndarray, seed: np.ndarray) -> np.ndarray:
        wrapped = seed + (q - seed + np.pi) % (2 * np.pi) - np.pi
        for i in range(6):  # if the nearest turn is out of range, try the neighbouring ones
            for candidate in (wrapped[i], wrapped[i] + 2 * np.pi, wrapped[i] - 2 * np.pi):
                if self.lower[i] - 1e-6 <= candidate <= self.upper[i] + 1e-6:
                    wrapped[i] = candidate
                    break
        return wrapped

    def solve(self, target: np.ndarray, seed=None, restarts: int = 12) -> IKSolution:
        """Joint angles putting the TCP at `target` (world 4x4). Raises IKError if none is in limits."""
        seed = self.arm.qpos()[:6] if seed is None else np.asarray(seed, dtype=float)
        flange_target = np.linalg.inv(self.base_pose) @ target @ np.linalg.inv(self.tcp_offset)
        goal = sapien_pose(flange_target)
        rng = np.random.default_rng(0)  # deterministic restarts: the same target gives the same answer
        seeds = [seed] + [rng.uniform(self.lower, self.upper) for _ in range(restarts)]
        best: IKSolution | None = None
        reasons = set()
        for start in seeds:
            q_init = np.zeros(8)
            q_init[:6] = start
            q, success, _ = self.model.compute_inverse_kinematics(
                self.flange_index, goal, initial_qpos=q_init, active_qmask=[1] * 6 + [0, 0], max_iterations=200)
            if not success:
                reasons.add("did not converge")
                continue
            q6 = self._wrap_towards(np.asarray(q[:6], dtype=float), seed)
            beyond = np.flatnonzero((q6 < self.lower - 1e-6) | (q6 > self.upper + 1e-6))
            if beyond.size:
                reasons.add("solutions break the limits of " + "/".join(f"joint{i + 1}" for i in beyond))
                continue
            q6 = np.clip(q6, self.lower, self.upper)
            reached = self.fk(q6)
            solution = IKSolution(q6, float(np.linalg.norm(reached[:3, 3] - target[:3, 3])),
                                  rotation_angle(reached[:3, :3], target[:3, :3]))
            if solution.position_error > POSITION_TOLERANCE or solution.angle_error > ANGLE_TOLERANCE:
                reasons.add("residual above tolerance")
                continue
            if best is None or np.abs(q6 - seed).sum() < np.abs(best.qpos - seed).sum():
                best = solution
            if start is seed:  # the seed's own basin: the smoothest answer, stop here
                break
        if best is None:
            raise IKError(self.side, target, ", ".join(sorted(reasons)))
        return best


def tcp_pose(position, rotation: np.ndarray) -> np.ndarray:
    """4x4 pose from a position and a 3x3 rotation."""
    pose = np.eye(4)
    pose[:3, :3] = rotation
    pose[:3, 3] = position
    return pose


__all__ = ["ArmIK", "IKError", "IKSolution", "tcp_pose"]
