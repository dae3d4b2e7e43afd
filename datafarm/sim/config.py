"""Typed rig configuration (configs/rig/<name>.yaml): arm mounts, table, timing, cameras, lights."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from datafarm.geometry import look_at, transform
from datafarm.paths import config_path
from datafarm.sim.spaces import JOINTS_PER_ARM, SIDES

Vec3 = tuple[float, float, float]
RGBA = tuple[float, float, float, float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Mount(_Strict):
    xyz: Vec3
    rpy: Vec3 = (0.0, 0.0, 0.0)

    def matrix(self) -> np.ndarray:
        return transform(self.xyz, self.rpy)


class TableSpec(_Strict):
    height: float = Field(gt=0)
    size: tuple[float, float]
    center: tuple[float, float] = (0.0, 0.0)
    thickness: float = 0.04
    color: RGBA = (0.55, 0.55, 0.57, 1.0)


class Timing(_Strict):
    control_hz: int = Field(30, gt=0)
    sim_hz: int = Field(300, gt=0)

    @model_validator(mode="after")
    def _whole_substeps(self) -> Timing:
        if self.sim_hz % self.control_hz:
            raise ValueError(
                f"sim_hz ({self.sim_hz}) must be a whole multiple of control_hz ({self.control_hz}), "
                f"e.g. sim_hz: {self.control_hz * max(1, round(self.sim_hz / self.control_hz))}"
            )
        return self

    @property
    def substeps(self) -> int:
        return self.sim_hz // self.control_hz


class CameraSpec(_Strict):
    """A pinhole camera. `mount` is "world" or "<arm>/<link>"; eye/target/up are in the mount frame."""

    mount: str = "world"
    width: int = Field(320, gt=0)
    height: int = Field(240, gt=0)
    fovy_deg: float = Field(55.6, gt=1, lt=179)
    near: float = 0.01
    far: float = 10.0
    eye: Vec3
    target: Vec3
    up: Vec3 = (0.0, 0.0, 1.0)

    @model_validator(mode="after")
    def _known_mount(self) -> CameraSpec:
        if self.mount != "world" and self.mount.split("/")[0] not in SIDES:
            raise ValueError(f"camera mount {self.mount!r}: use 'world' or '<arm>/<link>' with arm in {SIDES}")
        return self

    def local_pose(self) -> np.ndarray:
        """Camera pose in its mount frame (x forward, y left, z up)."""
        return look_at(self.eye, self.target, self.up)

    def intrinsics(self) -> np.ndarray:
        """3x3 pinhole matrix (square pixels, principal point at the image centre)."""
        fy = self.height / 2 / np.tan(np.deg2rad(self.fovy_deg) / 2)
        return np.array([[fy, 0, self.width / 2], [0, fy, self.height / 2], [0, 0, 1.0]])


class DirectionalLight(_Strict):
    direction: Vec3
    color: Vec3 = (1.0, 1.0, 1.0)
    shadow: bool = False


class Lighting(_Strict):
    ambient: Vec3 = (0.3, 0.3, 0.3)
    directional: list[DirectionalLight] = []


class RenderSettings(_Strict):
    """Camera shader: "lean" (ours, datafarm/sim/shaders/lean: the fastest on a CPU, no shadows),
    SAPIEN's "minimal" (the same picture to within a level, half the speed, shadows possible) or
    SAPIEN's "default" (nicer shading, slowest)."""

    shader: Literal["lean", "minimal", "default"] = "lean"
    shadows: bool = False  # shadow maps double the CPU render time with lavapipe; not with "lean"

    @model_validator(mode="after")
    def _shadows_need_a_shadowing_shader(self) -> RenderSettings:
        if self.shadows and self.shader == "lean":
            raise ValueError('render.shadows needs render.shader "minimal" or "default": "lean" draws no shadows')
        return self


class RigConfig(_Strict):
    robot: str = "piper"
    arms: dict[Literal["left", "right"], Mount]
    rest_qpos: tuple[float, ...]
    rest_gripper: float = 0.04
    table: TableSpec
    timing: Timing = Timing()
    cameras: dict[str, CameraSpec]
    lighting: Lighting = Lighting()
    render: RenderSettings = RenderSettings()

    @model_validator(mode="after")
    def _complete(self) -> RigConfig:
        if set(self.arms) != set(SIDES):
            raise ValueError(f"the rig needs both arms {list(SIDES)}, got {sorted(self.arms)}")
        if len(self.rest_qpos) != JOINTS_PER_ARM:
            raise ValueError(f"rest_qpos needs {JOINTS_PER_ARM} joint values, got {len(self.rest_qpos)}")
        return self

    def with_resolution(self, width: int, height: int) -> RigConfig:
        """The same rig with every camera at width x height (fov kept)."""
        cameras = {n: c.model_copy(update={"width": width, "height": height}) for n, c in self.cameras.items()}
        return self.model_copy(update={"cameras": cameras})


def load_rig_config(name_or_path: str | Path = "dual_piper", resolution: tuple[int, int] | None = None) -> RigConfig:
    """Load a rig config by name (configs/rig/<name>.yaml) or path, optionally at another resolution."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = config_path("rig", f"{name_or_path}.yaml")
    with open(path) as f:
        config = RigConfig.model_validate(yaml.safe_load(f))
    return config.with_resolution(*resolution) if resolution else config
