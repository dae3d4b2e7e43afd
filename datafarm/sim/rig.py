"""The simulated dual-arm PiPER rig: a SAPIEN scene with a table, two arms and three cameras.

Control contract: `step(action)` takes a 14-vector of joint-position targets (rad) and gripper
openings (m), named by `datafarm.sim.spaces.AXIS_NAMES`. Targets beyond a joint limit are clipped and
reported; the drive target then moves towards the clipped target no faster than the joint velocity
limit, so a recorded action is always one the real arm may execute.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sapien

from datafarm.geometry import X_TO_Z, matrix_to_quat_wxyz
from datafarm.robot import ArmModel, arm_urdf, load_arm_model
from datafarm.sim.config import CameraSpec, RigConfig, load_rig_config
from datafarm.sim.spaces import AXIS_NAMES, DOF, SIDES, arm_slice, as_action

log = logging.getLogger(__name__)

# Physical settings under which friction grasps hold (shared/STACK.md: 20/20 lifts).
_SOLVER_POSITION_ITERATIONS = 20
_CONTACT_OFFSET = 0.002
_FRICTION = 1.0
# Collision group bit (word 2: shapes sharing a bit ignore each other) per arm: an arm's own links
# never collide with each other, but the two arms and the objects do.
_ARM_GROUP_BIT = {"left": 1 << 30, "right": 1 << 29}


def _shader_dir(shader: str) -> str:
    """A shader name -> what SAPIEN takes: our own shaders' folder, or the name of one of SAPIEN's."""
    own = Path(__file__).with_name("shaders") / shader
    return str(own) if own.is_dir() else shader


def sapien_pose(matrix: np.ndarray) -> sapien.Pose:
    return sapien.Pose(matrix[:3, 3], matrix_to_quat_wxyz(matrix[:3, :3]))


def pose_matrix(pose: sapien.Pose) -> np.ndarray:
    return np.asarray(pose.to_transformation_matrix(), dtype=np.float64)


@dataclass
class StepReport:
    """What happened to one action: the target actually used, and the axes clipped to a limit."""

    target: np.ndarray
    clipped: tuple[str, ...] = ()


@dataclass
class CameraFrame:
    rgb: np.ndarray  # (H, W, 3) uint8
    depth: np.ndarray  # (H, W) float32 metres along the optical axis; 0 where nothing was hit
    segmentation: np.ndarray  # (H, W) int32 entity id (0: background); see DualArmRig.segmentation_legend
    extrinsic_cv: np.ndarray  # (4, 4) world -> camera, OpenCV axes (x right, y down, z forward)


@dataclass
class Arm:
    """One arm's articulation and its 7 control axes (six joints, then the gripper opening)."""

    side: str
    articulation: sapien.physx.PhysxArticulation
    lower: np.ndarray  # (7,)
    upper: np.ndarray  # (7,)
    max_velocity: np.ndarray  # (7,) rad/s and m/s
    drive_target: np.ndarray = field(default_factory=lambda: np.zeros(7))

    def qpos(self) -> np.ndarray:
        """Six joint angles and the gripper opening (the sum of both finger travels)."""
        q = self.articulation.get_qpos()
        return np.concatenate([q[:6], [q[6] - q[7]]])

    def qvel(self) -> np.ndarray:
        v = self.articulation.get_qvel()
        return np.concatenate([v[:6], [v[6] - v[7]]])

    def to_joint_targets(self, axes: np.ndarray) -> np.ndarray:
        """7 control values -> 8 joint targets (each finger travels half the opening)."""
        half = axes[6] / 2
        return np.concatenate([axes[:6], [half, -half]]).astype(np.float32)

    def set_state(self, axes: np.ndarray) -> None:
        self.articulation.set_qpos(self.to_joint_targets(axes))
        self.articulation.set_qvel(np.zeros(8, dtype=np.float32))
        self.command(axes)

    def command(self, axes: np.ndarray, velocity: np.ndarray | None = None) -> None:
        """Set the drive targets of all eight joints from 7 control values (and their rates, as a
        velocity feed-forward, so a moving target is followed without lag)."""
        self.drive_target = axes.copy()
        rates = self.to_joint_targets(np.zeros(7) if velocity is None else velocity)
        for joint, value, rate in zip(self.articulation.active_joints, self.to_joint_targets(axes), rates):
            joint.set_drive_target(float(value))
            joint.set_drive_velocity_target(float(rate))

    def link(self, name: str) -> sapien.physx.PhysxArticulationLinkComponent:
        return self.articulation.find_link_by_name(f"{self.side}_{name}")


class DualArmRig:
    """Two PiPER arms on a table with a head camera and two wrist cameras. Build with `create()`."""

    def __init__(self, scene: sapien.Scene, config: RigConfig, model: ArmModel, arms: dict[str, Arm],
                 cameras: dict[str, sapien.render.RenderCameraComponent], table: sapien.Entity):
        self.scene = scene
        self.config = config
        self.model = model
        self.arms = arms
        self.cameras = cameras
        self.table = table
        self.lower = np.concatenate([arms[s].lower for s in SIDES])
        self.upper = np.concatenate([arms[s].upper for s in SIDES])
        self.control_dt = 1.0 / config.timing.control_hz
        self.sim_dt = 1.0 / config.timing.sim_hz
        self.step_count = 0
        # Called after every physics substep (fixtures that integrate impulses, perturbations).
        self.substep_hooks: list = []

    # ----- construction -------------------------------------------------------------------------
    @classmethod
    def create(cls, config: RigConfig | str | None = None) -> DualArmRig:
        """Build the SAPIEN scene. Needs a Vulkan device (Mesa lavapipe on the CPU is enough)."""
        if not isinstance(config, RigConfig):
            config = load_rig_config(config or "dual_piper")
        model = load_arm_model(config.robot)
        sapien.physx.set_scene_config(enable_tgs=True)
        sapien.physx.set_body_config(solver_position_iterations=_SOLVER_POSITION_ITERATIONS,
                                     solver_velocity_iterations=1)
        sapien.physx.set_shape_config(contact_offset=_CONTACT_OFFSET, rest_offset=0.0)
        sapien.physx.set_default_material(_FRICTION, _FRICTION, 0.0)
        sapien.render.set_camera_shader_dir(_shader_dir(config.render.shader))  # global: before any camera exists
        sapien.render.set_picture_format("Color", "r8g8b8a8unorm")  # uint8 from the renderer, no conversion
        try:
            scene = sapien.Scene()
        except RuntimeError as error:
            raise RuntimeError(
                f"SAPIEN could not create a scene ({error}). It needs a Vulkan device; on a machine "
                "without a GPU install Mesa >= 25 lavapipe (run `make setup` as root), then check "
                "with `datafarm doctor`."
            ) from error
        scene.set_timestep(1.0 / config.timing.sim_hz)
        table = _add_table(scene, config)
        _add_lights(scene, config)
        arms = {side: _add_arm(scene, model, config, side) for side in SIDES}
        cameras = {name: _add_camera(scene, name, spec, arms) for name, spec in config.cameras.items()}
        rig = cls(scene, config, model, arms, cameras, table)
        rig.reset()
        return rig

    # ----- state ----------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        return self.step_count * self.control_dt

    def rest_state(self) -> np.ndarray:
        arm = np.array([*self.config.rest_qpos, self.config.rest_gripper])
        return np.concatenate([arm, arm])

    def reset(self, state: np.ndarray | None = None) -> None:
        """Teleport both arms to `state` (14 values; the rest pose by default), at rest."""
        state = self.rest_state() if state is None else as_action(state)
        state = np.clip(state, self.lower, self.upper)
        for side in SIDES:
            self.arms[side].set_state(state[arm_slice(side)])
        self.step_count = 0

    def qpos(self) -> np.ndarray:
        return np.concatenate([self.arms[s].qpos() for s in SIDES])

    def qvel(self) -> np.ndarray:
        return np.concatenate([self.arms[s].qvel() for s in SIDES])

    def drive_target(self) -> np.ndarray:
        return np.concatenate([self.arms[s].drive_target for s in SIDES])

    # ----- control --------------------------------------------------------------------------------
    def clip_action(self, action) -> tuple[np.ndarray, tuple[str, ...]]:
        action = as_action(action)
        clipped = np.clip(action, self.lower, self.upper)
        names = tuple(AXIS_NAMES[i] for i in np.flatnonzero(np.abs(clipped - action) > 1e-9))
        return clipped, names

    def step(self, action) -> StepReport:
        """Advance one control period towards `action` (see the module docstring)."""
        target, clipped = self.clip_action(action)
        if clipped:
            log.debug("action clipped to joint limits at %s", ", ".join(clipped))
        substeps = self.config.timing.substeps
        # Spread the move evenly over the control period (a constant rate, not a jump then a hold:
        # pulsed targets make the arm buzz, and a buzzing gripper lets objects slip).
        deltas = {side: np.clip((target[arm_slice(side)] - self.arms[side].drive_target) / substeps,
                                -self.arms[side].max_velocity * self.sim_dt, self.arms[side].max_velocity * self.sim_dt)
                  for side in SIDES}
        for _ in range(substeps):
            for side in SIDES:
                arm = self.arms[side]
                arm.command(arm.drive_target + deltas[side], deltas[side] / self.sim_dt)
                # Gravity and Coriolis compensation, as the real arm's firmware does.
                arm.articulation.set_qf(arm.articulation.compute_passive_force(True, True))
            self.scene.step()
            for hook in self.substep_hooks:
                hook()
        self.step_count += 1
        return StepReport(target=target, clipped=clipped)

    # ----- sensing --------------------------------------------------------------------------------
    def capture(self, cameras: list[str] | None = None) -> dict[str, CameraFrame]:
        """Render every (or the named) camera now."""
        names = list(self.cameras) if cameras is None else cameras
        unknown = set(names) - set(self.cameras)
        if unknown:
            raise KeyError(f"unknown cameras {sorted(unknown)}; the rig has {sorted(self.cameras)}")
        self.scene.update_render()
        frames = {}
        for name in names:
            camera = self.cameras[name]
            camera.take_picture()
            color = camera.get_picture("Color")
            depth, segmentation = self._depth_and_segmentation(camera)
            extrinsic = np.eye(4)
            extrinsic[:3] = camera.get_extrinsic_matrix()
            frames[name] = CameraFrame(
                rgb=np.ascontiguousarray(color[..., :3]),
                depth=depth,
                segmentation=segmentation,
                extrinsic_cv=extrinsic,
            )
        return frames

    def _depth_and_segmentation(self, camera) -> tuple[np.ndarray, np.ndarray]:
        if self.config.render.shader in ("lean", "minimal"):
            # One int32 image: camera-frame position in mm (xyz), then the entity id.
            packed = camera.get_picture("PositionSegmentation")
            return packed[..., 2].astype(np.float32) * np.float32(-0.001), packed[..., 3]
        position = camera.get_picture("Position")  # float metres; w = 1 where nothing was hit
        depth = np.where(position[..., 3] < 1, -position[..., 2], 0.0).astype(np.float32)
        return depth, camera.get_picture("Segmentation")[..., 1].astype(np.int32)

    def intrinsics(self, camera: str) -> np.ndarray:
        return np.asarray(self.cameras[camera].get_intrinsic_matrix(), dtype=np.float64)

    def segmentation_legend(self) -> dict[int, str]:
        """Entity id in the segmentation images -> entity name (links are "<arm>_<link>")."""
        return {entity.per_scene_id: entity.name for entity in self.scene.entities}

    def entity_ids(self, prefix: str) -> list[int]:
        """Segmentation ids of every entity whose name starts with `prefix`."""
        return [i for i, name in self.segmentation_legend().items() if name.startswith(prefix)]

    def tcp_pose(self, side: str) -> np.ndarray:
        """World pose (4x4) of the point between the fingers."""
        flange = pose_matrix(self.arms[side].link(self.model.flange_link).entity_pose)
        offset = np.eye(4)
        offset[:3, 3] = self.model.tcp_offset
        return flange @ offset


# ----- scene parts --------------------------------------------------------------------------------
def _add_table(scene: sapien.Scene, config: RigConfig) -> sapien.Entity:
    table = config.table
    half = [table.size[0] / 2, table.size[1] / 2, table.thickness / 2]
    builder = scene.create_actor_builder()
    builder.add_box_collision(half_size=half)
    builder.add_box_visual(half_size=half, material=sapien.render.RenderMaterial(base_color=table.color))
    entity = builder.build_static(name="table")
    entity.set_pose(sapien.Pose([table.center[0], table.center[1], table.height - table.thickness / 2]))
    floor = scene.create_actor_builder()
    floor.add_plane_collision(sapien.Pose(q=list(X_TO_Z)))
    floor.add_plane_visual(sapien.Pose(q=list(X_TO_Z)), [10, 10, 10],
                           sapien.render.RenderMaterial(base_color=[0.35, 0.34, 0.33, 1.0]))
    floor.build_static(name="floor")
    return entity


def _add_lights(scene: sapien.Scene, config: RigConfig) -> None:
    scene.set_ambient_light(list(config.lighting.ambient))
    for light in config.lighting.directional:
        scene.add_directional_light(list(light.direction), list(light.color),
                                    shadow=light.shadow and config.render.shadows,
                                    shadow_scale=2.0, shadow_map_size=1024)


def _urdf_file(model: ArmModel, prefix: str) -> Path:
    """The generated URDF, written once per process to a temp folder for SAPIEN's loader."""
    directory = Path(tempfile.gettempdir()) / "datafarm-urdf"
    directory.mkdir(exist_ok=True)
    text = arm_urdf(model, prefix)
    path = directory / f"{prefix}{model.name}-{abs(hash(text)):x}.urdf"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def _add_arm(scene: sapien.Scene, model: ArmModel, config: RigConfig, side: str) -> Arm:
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    builder = loader.load_file_as_articulation_builder(str(_urdf_file(model, f"{side}_")))
    for link_builder in builder.link_builders:
        link_builder.collision_groups[2] |= _ARM_GROUP_BIT[side]
    articulation = builder.build()
    articulation.name = f"{side}_arm"
    articulation.set_root_pose(sapien_pose(config.arms[side].matrix()))
    for index, joint in enumerate(articulation.active_joints):  # six arm joints, then two fingers
        gains = model.drives["arm" if index < 6 else "finger"]
        joint.set_drive_properties(gains.stiffness, gains.damping, gains.force_limit)
    limits = articulation.get_qlimits()
    lower = np.concatenate([limits[:6, 0], [0.0]])
    upper = np.concatenate([limits[:6, 1], [model.gripper.stroke]])
    max_velocity = np.array([model.max_joint_velocity] * 6 + [model.gripper.max_speed])
    return Arm(side=side, articulation=articulation, lower=lower, upper=upper, max_velocity=max_velocity)


def _add_camera(scene: sapien.Scene, name: str, spec: CameraSpec,
                arms: dict[str, Arm]) -> sapien.render.RenderCameraComponent:
    fovy = np.deg2rad(spec.fovy_deg)
    pose = sapien_pose(spec.local_pose())
    if spec.mount == "world":
        camera = scene.add_camera(name, spec.width, spec.height, fovy, spec.near, spec.far)
        camera.entity.set_pose(pose)
        return camera
    side, link_name = spec.mount.split("/", 1)
    mount = arms[side].link(link_name).entity
    return scene.add_mounted_camera(name, mount, pose, spec.width, spec.height, fovy, spec.near, spec.far)


__all__ = ["CameraFrame", "DOF", "DualArmRig", "StepReport"]
