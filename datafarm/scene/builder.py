"""Build a SceneSpec into the rig's SAPIEN scene, at the poses and sizes sampled for one episode."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sapien

from datafarm.geometry import X_TO_Z, rpy_to_matrix
from datafarm.scene.fixtures import Fixture, build_fixture
from datafarm.scene.spec import (BoxGeometry, CompoundGeometry, CupGeometry, CylinderGeometry, MeshGeometry,
                                 ObjectSpec, SceneSpec, SphereGeometry)
from datafarm.sim.rig import DualArmRig, pose_matrix, sapien_pose


@dataclass(frozen=True)
class Placement:
    """Where one item goes this episode: world x, y, yaw, and a uniform scale."""

    x: float
    y: float
    yaw: float = 0.0
    scale: float = 1.0

    def matrix(self, z: float) -> np.ndarray:
        pose = np.eye(4)
        pose[:3, :3] = rpy_to_matrix((0.0, 0.0, self.yaw))
        pose[:3, 3] = (self.x, self.y, z)
        return pose


@dataclass
class SceneObject:
    """A built rigid object. Its frame origin is the centre of its bottom face."""

    name: str
    entity: sapien.Entity
    height: float  # m, at this episode's scale
    spec: ObjectSpec

    @property
    def body(self) -> sapien.physx.PhysxRigidBaseComponent:
        return self.entity.find_component_by_type(sapien.physx.PhysxRigidBaseComponent)

    def pose(self) -> np.ndarray:
        return pose_matrix(self.entity.pose)

    def set_pose(self, matrix: np.ndarray) -> None:
        self.entity.set_pose(sapien_pose(matrix))

    def center(self) -> np.ndarray:
        """World position of the geometric centre."""
        pose = self.pose()
        return pose[:3, 3] + pose[:3, 2] * self.height / 2


@dataclass
class BuiltScene:
    objects: dict[str, SceneObject] = field(default_factory=dict)
    fixtures: dict[str, Fixture] = field(default_factory=dict)

    def top_height(self, name: str, table_height: float) -> float:
        if name == "table":
            return table_height
        if name in self.objects:
            return float(self.objects[name].pose()[2, 3] + self.objects[name].height)
        return self.fixtures[name].top_height()


def _material(scene: sapien.Scene, friction: float) -> sapien.physx.PhysxMaterial:
    return scene.create_physical_material(friction, friction, 0.0)


def _add_shapes(builder: sapien.ActorBuilder, spec: ObjectSpec, scale: float, package_dir: Path | None,
                material: sapien.physx.PhysxMaterial) -> float:
    """Add collision and visual shapes with the origin at the bottom centre; returns the height."""
    render = sapien.render.RenderMaterial(base_color=list(spec.color))
    geometry = spec.geometry
    if isinstance(geometry, BoxGeometry):
        half = np.asarray(geometry.half_size) * scale
        pose = sapien.Pose([0, 0, half[2]])
        builder.add_box_collision(pose, half, material=material)
        builder.add_box_visual(pose, half, material=render)
        return float(2 * half[2])
    if isinstance(geometry, SphereGeometry):
        radius = geometry.radius * scale
        builder.add_sphere_collision(sapien.Pose([0, 0, radius]), radius, material=material)
        builder.add_sphere_visual(sapien.Pose([0, 0, radius]), radius, material=render)
        return 2 * radius
    upright = list(X_TO_Z)
    if isinstance(geometry, CylinderGeometry):
        radius, height = geometry.radius * scale, geometry.height * scale
        pose = sapien.Pose([0, 0, height / 2], upright)
        builder.add_cylinder_collision(pose, radius, height / 2, material=material)
        builder.add_cylinder_visual(pose, radius, height / 2, material=render)
        return height
    if isinstance(geometry, CupGeometry):
        return _add_cup(builder, geometry, scale, material, render)
    if isinstance(geometry, CompoundGeometry):
        return _add_compound(builder, geometry, scale, material, render)
    if isinstance(geometry, MeshGeometry):
        if package_dir is None:
            raise ValueError(f"{spec.name}: a mesh object needs its task package folder to find {geometry.file}")
        return _add_mesh(builder, geometry, scale, package_dir / geometry.file, material, render)
    raise TypeError(f"unsupported geometry {type(geometry).__name__}")


def _add_cup(builder, geometry: CupGeometry, scale: float, material, render) -> float:
    radius, height, wall = geometry.radius * scale, geometry.height * scale, geometry.wall * scale
    bottom = wall
    upright = list(X_TO_Z)
    builder.add_cylinder_collision(sapien.Pose([0, 0, bottom / 2], upright), radius, bottom / 2, material=material)
    builder.add_cylinder_visual(sapien.Pose([0, 0, bottom / 2], upright), radius, bottom / 2, material=render)
    # Staves: boxes tangent to the circle; their width covers the arc so the wall has no gaps.
    mid = radius - wall / 2
    half_width = mid * np.tan(np.pi / geometry.staves) + wall / 2
    half = [wall / 2, half_width, (height - bottom) / 2]
    for i in range(geometry.staves):
        angle = 2 * np.pi * i / geometry.staves
        q = [np.cos(angle / 2), 0, 0, np.sin(angle / 2)]
        pose = sapien.Pose([mid * np.cos(angle), mid * np.sin(angle), bottom + half[2]], q)
        builder.add_box_collision(pose, half, material=material)
        builder.add_box_visual(pose, half, material=render)
    return height


def _add_compound(builder, geometry: CompoundGeometry, scale: float, material, render) -> float:
    """Each part as its own primitive collision and visual shape; returns the parts' top."""
    for part in geometry.parts:
        pose = sapien.Pose(np.asarray(part.xyz) * scale)
        pose.set_rpy(part.rpy)
        if part.shape == "box":
            half = np.asarray(part.half_size) * scale
            builder.add_box_collision(pose, half, material=material)
            builder.add_box_visual(pose, half, material=render)
        elif part.shape == "sphere":
            builder.add_sphere_collision(pose, part.radius * scale, material=material)
            builder.add_sphere_visual(pose, part.radius * scale, material=render)
        else:  # SAPIEN's cylinders run along x: turn them onto the part's z
            along_z = pose * sapien.Pose(q=list(X_TO_Z))
            builder.add_cylinder_collision(along_z, part.radius * scale, part.height * scale / 2, material=material)
            builder.add_cylinder_visual(along_z, part.radius * scale, part.height * scale / 2, material=render)
    return float(max(part.corners()[:, 2].max() for part in geometry.parts) * scale)


def _add_mesh(builder, geometry: MeshGeometry, scale: float, path: Path, material, render) -> float:
    import trimesh

    if not path.exists():
        raise FileNotFoundError(f"mesh {path} not found (scene.yaml geometry.file)")
    mesh = trimesh.load(path, force="mesh")
    mesh.apply_scale(geometry.scale * scale)
    mesh.apply_translation([-mesh.bounds.mean(axis=0)[0], -mesh.bounds.mean(axis=0)[1], -mesh.bounds[0, 2]])
    parts_file = _coacd_parts(mesh, geometry.coacd_threshold)
    builder.add_multiple_convex_collisions_from_file(str(parts_file), material=material)
    visual_file = parts_file.with_name(parts_file.stem + "-visual.obj")
    if not visual_file.exists():
        mesh.export(visual_file)
    builder.add_visual_from_file(str(visual_file), material=render)
    return float(mesh.bounds[1, 2])


def _coacd_parts(mesh, threshold: float) -> Path:
    """Convex decomposition by coacd, cached by the mesh's content hash (it takes seconds)."""
    import hashlib
    import tempfile

    import trimesh

    key = hashlib.sha256(mesh.vertices.tobytes() + mesh.faces.tobytes() + str(threshold).encode()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / "datafarm-coacd"
    cache.mkdir(exist_ok=True)
    out = cache / f"{key}.obj"
    if not out.exists():
        import coacd

        parts = coacd.run_coacd(coacd.Mesh(mesh.vertices, mesh.faces), threshold=threshold)
        scene = trimesh.Scene([trimesh.Trimesh(v, f) for v, f in parts])
        tmp = out.with_suffix(".tmp.obj")
        scene.export(tmp)
        tmp.replace(out)
    return out


def build_scene(rig: DualArmRig, spec: SceneSpec, placements: dict[str, Placement],
                package_dir: Path | None = None, fixture_params: dict[str, dict[str, float]] | None = None) -> BuiltScene:
    """Add every object and fixture to the rig's scene, supports first, resting on their support.

    `fixture_params` overrides fixtures' params with this episode's sampled values."""
    built = BuiltScene()
    table_height = rig.config.table.height
    pending = [*spec.fixtures, *spec.objects]
    while pending:
        ready = [item for item in pending if item.support == "table" or item.support in {*built.objects, *built.fixtures}]
        if not ready:
            raise ValueError(f"support cycle among {[item.name for item in pending]}")
        for item in ready:
            pending.remove(item)
            placement = placements[item.name]
            z = built.top_height(item.support, table_height)
            if isinstance(item, ObjectSpec):
                builder = rig.scene.create_actor_builder()
                height = _add_shapes(builder, item, placement.scale, package_dir, _material(rig.scene, item.friction))
                entity = builder.build_static(name=item.name) if item.static else builder.build(name=item.name)
                entity.set_pose(sapien_pose(placement.matrix(z)))
                if not item.static:
                    body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
                    ratio = item.mass / body.get_mass()  # shapes were built at water density
                    body.set_mass(item.mass)
                    body.set_inertia(body.get_inertia() * ratio)
                built.objects[item.name] = SceneObject(item.name, entity, height, item)
            else:
                sampled = (fixture_params or {}).get(item.name)
                if sampled:
                    item = item.model_copy(update={"params": {**item.params, **sampled}})
                built.fixtures[item.name] = build_fixture(rig, item, placement.matrix(z))
    return built
