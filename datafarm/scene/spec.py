"""Declarative scene spec of a task package (scene.yaml): what is on the table and how it varies.

Positions are in the world frame (see configs/rig/dual_piper.yaml: the table top is at z = table
height, the arms face +y). An object's z is not given: it rests on its `support` (the table, or the
top of another object). Ranges are [low, high] offsets added to the nominal value per episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union

import numpy as np
import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from datafarm.errors import BadInput
from datafarm.geometry import rpy_to_matrix
from datafarm.scene.fixtures import known_fixture_kind
from datafarm.validation import describe

RGBA = tuple[float, float, float, float]
Range = tuple[float, float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PoseRandomization(_Strict):
    x: Range = (0.0, 0.0)
    y: Range = (0.0, 0.0)
    yaw: Range = (0.0, 0.0)  # rad
    scale: Range = (1.0, 1.0)  # uniform size factor


class _Placed(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    xy: tuple[float, float]
    yaw: float = 0.0
    support: str = "table"
    randomize: PoseRandomization = PoseRandomization()


class BoxGeometry(_Strict):
    shape: Literal["box"] = "box"
    half_size: tuple[float, float, float]


class SphereGeometry(_Strict):
    shape: Literal["sphere"] = "sphere"
    radius: float = Field(gt=0)


class CylinderGeometry(_Strict):
    shape: Literal["cylinder"] = "cylinder"  # upright, axis along z
    radius: float = Field(gt=0)
    height: float = Field(gt=0)


class CupGeometry(_Strict):
    """Open-topped cup: a bottom disc and a ring of wall staves (an exact convex decomposition)."""

    shape: Literal["cup"] = "cup"
    radius: float = Field(gt=0, description="outer radius, m")
    height: float = Field(gt=0)
    wall: float = Field(0.004, gt=0)
    staves: int = Field(16, ge=8)


class MeshGeometry(_Strict):
    """A mesh file (relative to the task package); collision by convex decomposition (coacd)."""

    shape: Literal["mesh"] = "mesh"
    file: str
    scale: float = 1.0
    coacd_threshold: float = 0.05


class Part(_Strict):
    """One primitive of a compound, its centre at `xyz` and turned by `rpy` in the object's frame.
    A box needs `half_size`; a cylinder `radius` and `height` (along its own z); a sphere `radius`."""

    shape: Literal["box", "cylinder", "sphere"]
    half_size: tuple[float, float, float] | None = None
    radius: float | None = Field(None, gt=0)
    height: float | None = Field(None, gt=0)
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @model_validator(mode="after")
    def _sized(self) -> Part:
        needed = {"box": ["half_size"], "cylinder": ["radius", "height"], "sphere": ["radius"]}[self.shape]
        missing = [name for name in needed if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a {self.shape} part needs {missing}")
        return self

    def corners(self) -> np.ndarray:
        """(8, 3) corners of the part's bounding box in the object's frame."""
        if self.shape == "box":
            half = np.asarray(self.half_size)
        elif self.shape == "cylinder":
            half = np.array([self.radius, self.radius, self.height / 2])
        else:
            half = np.full(3, self.radius)
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        return (signs * half) @ rpy_to_matrix(self.rpy).T + np.asarray(self.xyz)


class CompoundGeometry(_Strict):
    """A rigid union of primitives (a screw, a nut, a basket): exact convex parts, no decomposition.
    The object's frame origin is its bottom centre, so the parts' lowest point should be at z = 0."""

    shape: Literal["compound"] = "compound"
    parts: list[Part] = Field(min_length=1)

    @property
    def half_size(self) -> tuple[float, float, float]:
        """Half extents of the parts' bounding box about the origin (the footprint, for placement)."""
        corners = np.vstack([part.corners() for part in self.parts])
        return (float(np.abs(corners[:, 0]).max()), float(np.abs(corners[:, 1]).max()), float(corners[:, 2].max() / 2))


Geometry = Annotated[Union[BoxGeometry, SphereGeometry, CylinderGeometry, CupGeometry, MeshGeometry,
                           CompoundGeometry], Field(discriminator="shape")]


class ObjectSpec(_Placed):
    """A rigid object."""

    geometry: Geometry
    mass: float = Field(gt=0)
    friction: float = Field(1.0, ge=0)
    color: RGBA = (0.8, 0.2, 0.2, 1.0)
    static: bool = False


class FixtureSpec(_Placed):
    """A built piece of furniture or equipment (drawer cabinet, scale, drum, towel, ...).

    `kind` names a builder in datafarm.scene.fixtures; `params` are that builder's own settings.
    """

    kind: Annotated[str, AfterValidator(known_fixture_kind)]
    params: dict[str, Any] = {}
    # Offsets [low, high] added per episode to numeric params (geometry family), e.g. {opening: [-0.01, 0.02]}.
    randomize_params: dict[str, Range] = {}
    footprint_radius: float = Field(0.1, gt=0, description="keeps randomized objects this far away")


class TableSurface(_Strict):
    color: RGBA = (0.48, 0.48, 0.5, 1.0)
    friction: float = 1.0


class SceneSpec(_Strict):
    table: TableSurface = TableSurface()
    objects: list[ObjectSpec] = []
    fixtures: list[FixtureSpec] = []

    @model_validator(mode="after")
    def _consistent(self) -> SceneSpec:
        for fixture in self.fixtures:
            unknown = set(fixture.randomize_params) - set(fixture.params)
            if unknown:
                raise ValueError(f"{fixture.name}: randomize_params {sorted(unknown)} need a nominal value in params")
        names = [o.name for o in self.objects] + [f.name for f in self.fixtures]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"scene names must be unique; repeated: {duplicates}")
        known = {"table", *names}
        for item in [*self.objects, *self.fixtures]:
            if item.support not in known:
                raise ValueError(f"{item.name}: support {item.support!r} is not in the scene; known: {sorted(known)}")
        return self

    def item(self, name: str) -> ObjectSpec | FixtureSpec:
        for item in [*self.objects, *self.fixtures]:
            if item.name == name:
                return item
        raise KeyError(f"no object or fixture {name!r}; the scene has {[i.name for i in [*self.objects, *self.fixtures]]}")


class SceneSpecError(BadInput, ValueError):
    """scene.yaml is not valid YAML, breaks the schema, names an unknown fixture kind or a missing file."""


def mesh_files(spec: SceneSpec) -> list[str]:
    """The mesh files the spec names (relative to its folder): they travel with scene.yaml."""
    return sorted({item.geometry.file for item in spec.objects if isinstance(item.geometry, MeshGeometry)})


def load_scene_spec(path: str | Path) -> SceneSpec:
    """The validated spec, or SceneSpecError naming the file, the setting and the fix. Mesh files are
    resolved against the spec's folder and must exist."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise SceneSpecError(f"{path}: not valid YAML ({' '.join(str(error).split())}); fix the syntax") from None
    if data is not None and not isinstance(data, dict):
        raise SceneSpecError(f"{path}: must hold a mapping (table, objects, fixtures), got {type(data).__name__}")
    try:
        spec = SceneSpec.model_validate(data or {})
    except ValidationError as error:
        raise SceneSpecError(describe(error, str(path))) from None
    for item in spec.objects:
        if isinstance(item.geometry, MeshGeometry) and not (path.parent / item.geometry.file).is_file():
            raise SceneSpecError(f"{path}: object {item.name!r} names mesh file {item.geometry.file!r}, which is not "
                                 f"in {path.parent}; add the file or correct the name")
    return spec


def footprint_radius(item: ObjectSpec | FixtureSpec) -> float:
    """Radius (m, at scale 1) of a circle around the item's footprint on its support."""
    if isinstance(item, FixtureSpec):
        return item.footprint_radius
    g = item.geometry
    if isinstance(g, CompoundGeometry):
        return float(max(np.hypot(*part.corners()[:, :2].T).max() for part in g.parts))
    if isinstance(g, (SphereGeometry, CylinderGeometry, CupGeometry)):
        return g.radius
    if isinstance(g, BoxGeometry):
        return float(np.hypot(g.half_size[0], g.half_size[1]))
    return 0.05
