"""Typed model of one PiPER arm, loaded from configs/robot/<name>.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from datafarm.paths import config_path

Vec3 = tuple[float, float, float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JointSpec(_Strict):
    name: str
    type: Literal["revolute", "prismatic", "fixed"]
    parent: str
    child: str
    xyz: Vec3
    rpy: Vec3
    axis: Vec3 = (0.0, 0.0, 1.0)
    limit: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _limit_for_moving_joints(self) -> JointSpec:
        if self.type != "fixed" and (self.limit is None or self.limit[0] > self.limit[1]):
            raise ValueError(f"joint {self.name}: a {self.type} joint needs limit [lower, upper]")
        return self


class LinkInertia(_Strict):
    mass: float = Field(gt=0)


class ShapeSpec(_Strict):
    kind: Literal["box", "capsule", "cylinder"]
    xyz: Vec3 = (0.0, 0.0, 0.0)
    rpy: Vec3 = (0.0, 0.0, 0.0)
    half_size: Vec3 | None = None
    radius: float | None = None
    half_length: float | None = None
    color: Literal["body", "accent"] = "body"

    @model_validator(mode="after")
    def _sized(self) -> ShapeSpec:
        if self.kind == "box" and self.half_size is None:
            raise ValueError("a box shape needs half_size")
        if self.kind != "box" and (self.radius is None or self.half_length is None):
            raise ValueError(f"a {self.kind} shape needs radius and half_length")
        return self


class DriveGains(_Strict):
    stiffness: float
    damping: float
    force_limit: float


class GripperSpec(_Strict):
    stroke: float = Field(gt=0, description="total opening of the two fingers, m")
    max_speed: float = Field(gt=0, description="opening speed, m/s")
    finger_joints: tuple[str, str]


class ArmModel(_Strict):
    """One arm: kinematic chain, inertia, drives, gripper and primitive geometry."""

    name: str
    base_link: str
    flange_link: str
    tcp_offset: Vec3
    zero_offset_old_minus_new: tuple[float, float, float, float, float, float]
    joints: tuple[JointSpec, ...]
    links: dict[str, LinkInertia]
    max_joint_velocity: float
    gripper: GripperSpec
    drives: dict[Literal["arm", "finger"], DriveGains]
    visual_color: tuple[float, float, float, float]
    accent_color: tuple[float, float, float, float]
    shapes: dict[str, tuple[ShapeSpec, ...]]

    @model_validator(mode="after")
    def _consistent(self) -> ArmModel:
        names = {self.base_link} | {j.child for j in self.joints}
        for joint in self.joints:
            if joint.parent not in names:
                raise ValueError(f"joint {joint.name}: parent link {joint.parent} is not in the chain")
        missing = names - set(self.links)
        if missing:
            raise ValueError(f"links without mass: {sorted(missing)}")
        for finger in self.gripper.finger_joints:
            if finger not in {j.name for j in self.joints if j.type == "prismatic"}:
                raise ValueError(f"gripper finger joint {finger} is not a prismatic joint of the arm")
        return self

    @property
    def arm_joints(self) -> tuple[JointSpec, ...]:
        """The six revolute joints, base to flange."""
        return tuple(j for j in self.joints if j.type == "revolute")

    @property
    def finger_joints(self) -> tuple[JointSpec, ...]:
        by_name = {j.name: j for j in self.joints}
        return tuple(by_name[n] for n in self.gripper.finger_joints)

    @property
    def link_names(self) -> tuple[str, ...]:
        return (self.base_link, *(j.child for j in self.joints))


def load_arm_model(name_or_path: str | Path = "piper") -> ArmModel:
    """Load an arm model by name (configs/robot/<name>.yaml) or from a YAML path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = config_path("robot", f"{name_or_path}.yaml")
    with open(path) as f:
        return ArmModel.model_validate(yaml.safe_load(f))
