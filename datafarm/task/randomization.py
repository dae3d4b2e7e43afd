"""Per-episode randomization, sampled from one seed so any episode replays exactly.

Families (each can be switched off): execution (start-pose noise, speed scaling, an arm displaced
mid-episode, and in `recovery_fraction` of the episodes a recovery disturbance: datafarm.task.recovery),
geometry (object poses and sizes within the scene spec's ranges), appearance (table colour, light colour,
intensity and direction, object colour jitter), camera (extrinsic jitter), and the render's background
(the plate behind the table and its room light: datafarm.render.appearance).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from datafarm.cameras import CAMERAS
from datafarm.geometry import look_at
from datafarm.render.appearance import LIGHT_GAIN_RANGE
from datafarm.render.textures import CLOTH_HUE_SPREAD, CLOTH_SATURATION
from datafarm.scene.builder import Placement
from datafarm.scene.spec import SceneSpec, footprint_radius
from datafarm.sim.config import RigConfig
from datafarm.task.env import Perturbation
from datafarm.task.recovery import Disturbance, RecoveryKind, sample_disturbance

RECOVERY_STREAM = 1  # recovery draws come from their own stream: switching them on changes no other draw


class RandomizationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    execution: bool = True
    geometry: bool = True
    appearance: bool = True
    camera: bool = True
    background: bool = True  # the render's background plate and room light (datafarm.render.appearance)
    start_noise: float = 0.05  # rad, per joint
    speed: tuple[float, float] = (0.8, 1.2)
    perturbation_probability: float = 0.3
    perturbation_magnitude: float = 0.06  # rad, per joint
    perturbation_window: tuple[float, float] = (0.5, 4.0)  # s after the start
    object_nudge_probability: float = 0.2  # an untouched object slid along its support mid-episode
    object_nudge_distance: float = 0.03  # m, at most, in x and in y
    # Recovery episodes (datafarm.task.recovery), of the kinds the task declares in task.yaml `recovery`.
    recovery_fraction: float = Field(0.0, ge=0.0, le=1.0)  # share of the episodes that are recovery episodes
    push_distance: tuple[float, float] = (0.06, 0.14)  # m the TCP is pushed
    relocation_distance: tuple[float, float] = (0.10, 0.38)  # m a mis-grasped object is moved
    push_window: tuple[float, float] = (0.3, 2.0)  # s after the start: the earliest moment of a push
    light_intensity: tuple[float, float] = (0.7, 1.3)
    color_jitter: float = 0.06
    # How far the render's tablecloth colours and light tint reach (datafarm.render.appearance.AppearanceRange).
    cloth_saturation: tuple[float, float] = CLOTH_SATURATION  # HSV saturation of a procedural cloth
    cloth_hue_spread: float = Field(CLOTH_HUE_SPREAD, ge=0.0, le=0.5)  # a cloth's colours' hues differ by up to 2x
    # share of the cloths that are procedural rather than real table crops; None: every pool entry alike
    procedural_cloth_share: float | None = Field(None, ge=0.0, le=1.0)
    light_gains: tuple[float, float] = LIGHT_GAIN_RANGE  # per RGB channel of the render's light, before mean 1
    camera_position_jitter: float = 0.01  # m
    camera_angle_jitter: float = 0.02  # rad

    @model_validator(mode="after")
    def _appearance_reach(self) -> RandomizationConfig:
        low, high = self.cloth_saturation
        if not 0 <= low <= high <= 1:
            raise ValueError(f"cloth_saturation {self.cloth_saturation} must be (low, high) with 0 <= low <= high <= 1")
        low, high = self.light_gains
        if not 0 < low <= high:
            raise ValueError(f"light_gains {self.light_gains} must be (low, high) with 0 < low <= high")
        return self

    @classmethod
    def none(cls) -> RandomizationConfig:
        return cls(execution=False, geometry=False, appearance=False, camera=False, background=False)


@dataclass
class EpisodeSample:
    """Everything drawn for one episode (stored with it)."""

    seed: int
    placements: dict[str, Placement]
    fixture_params: dict[str, dict[str, float]]
    start_noise: list[float]
    speed: float
    perturbations: list[Perturbation] = field(default_factory=list)
    disturbance: Disturbance | None = None  # a recovery episode's
    table_color: list[float] | None = None
    light_scale: list[float] | None = None
    light_direction: list[float] | None = None
    object_colors: dict[str, list[float]] = field(default_factory=dict)
    camera_jitter: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["placements"] = {k: asdict(v) for k, v in self.placements.items()}
        data["perturbations"] = [p.to_dict() for p in self.perturbations]
        return data


def _sample_placements(spec: SceneSpec, rng: np.random.Generator) -> dict[str, Placement]:
    """Poses within ranges; items on the table are resampled until their footprints do not overlap."""
    items = [*spec.fixtures, *spec.objects]
    for _ in range(200):
        placements = {}
        for item in items:
            r = item.randomize
            scale = rng.uniform(*r.scale)
            placements[item.name] = Placement(item.xy[0] + rng.uniform(*r.x), item.xy[1] + rng.uniform(*r.y),
                                              item.yaw + rng.uniform(*r.yaw), scale)
        on_table = [i for i in items if i.support == "table"]
        clear = all(
            np.hypot(placements[a.name].x - placements[b.name].x, placements[a.name].y - placements[b.name].y)
            > footprint_radius(a) + footprint_radius(b) + 0.01
            for n, a in enumerate(on_table) for b in on_table[n + 1:]
        )
        if clear:
            return placements
    raise ValueError("could not place the scene's objects without overlap in 200 draws: widen the table area "
                     "or narrow the randomization ranges in scene.yaml")


def _nominal_placements(spec: SceneSpec) -> dict[str, Placement]:
    return {item.name: Placement(item.xy[0], item.xy[1], item.yaw, 1.0) for item in [*spec.fixtures, *spec.objects]}


def sample_episode(spec: SceneSpec, seed: int, config: RandomizationConfig, max_seconds: float,
                   control_hz: int, recovery_kinds: list[RecoveryKind] | tuple = ()) -> EpisodeSample:
    """The episode's draws. Every family is drawn, in one order, whether it is on or not, and a family
    that is off is then left at its nominal values: switching one off changes nothing else of the
    episode, so a leave-one-out ablation compares like with like."""
    rng = np.random.default_rng(seed)
    placements = _sample_placements(spec, rng)
    randomized = [f for f in spec.fixtures if f.randomize_params]
    fixture_params = {f.name: {k: float(f.params[k]) + float(rng.uniform(*r))
                               for k, r in sorted(f.randomize_params.items())} for f in randomized}
    if not config.geometry:
        placements = _nominal_placements(spec)
        fixture_params = {f.name: {k: float(f.params[k]) for k in sorted(f.randomize_params)} for f in randomized}
    sample = EpisodeSample(seed=seed, placements=placements, fixture_params=fixture_params,
                           start_noise=[0.0] * 14, speed=1.0)
    execution = _draw_execution(spec, rng, config, max_seconds, control_hz)
    if config.execution:
        sample.start_noise, sample.speed, sample.perturbations = execution
        recovery = np.random.default_rng([seed, RECOVERY_STREAM])
        if recovery_kinds and recovery.random() < config.recovery_fraction:
            sample.disturbance = sample_disturbance(recovery, list(recovery_kinds), config.push_distance,
                                                    config.relocation_distance, config.push_window, control_hz)
    appearance = _draw_appearance(spec, rng, config)
    if config.appearance:
        sample.table_color, sample.light_scale, sample.light_direction, sample.object_colors = appearance
    camera_jitter = {name: [*rng.normal(0, config.camera_position_jitter, 3).tolist(),
                            *rng.normal(0, config.camera_angle_jitter, 3).tolist()] for name in CAMERAS}
    if config.camera:
        sample.camera_jitter = camera_jitter
    return sample


def _draw_execution(spec: SceneSpec, rng: np.random.Generator, config: RandomizationConfig, max_seconds: float,
                    control_hz: int) -> tuple[list[float], float, list[Perturbation]]:
    """Start-pose noise, speed, and the small pushes (an arm, an untouched object) of the execution family."""
    start_noise = rng.uniform(-config.start_noise, config.start_noise, 14).tolist()
    for i in (6, 13):
        start_noise[i] = 0.0  # grippers start as configured
    speed = float(rng.uniform(*config.speed))
    perturbations = []
    if rng.random() < config.perturbation_probability:
        at = rng.uniform(*config.perturbation_window)
        perturbations.append(Perturbation(
            at_step=int(min(at, max_seconds / 2) * control_hz), kind="arm",
            target=str(rng.choice(["left", "right"])),
            offset=tuple(rng.uniform(-config.perturbation_magnitude, config.perturbation_magnitude, 6).tolist()),
        ))
    movable = [o.name for o in spec.objects if not o.static]
    if movable and rng.random() < config.object_nudge_probability:
        at = rng.uniform(*config.perturbation_window)
        distance = config.object_nudge_distance
        perturbations.append(Perturbation(
            at_step=int(min(at, max_seconds / 2) * control_hz), kind="object", target=str(rng.choice(movable)),
            offset=tuple(rng.uniform(-distance, distance, 2).tolist()),
        ))
    return start_noise, speed, perturbations


def _draw_appearance(spec: SceneSpec, rng: np.random.Generator, config: RandomizationConfig):
    """Table colour, light scale and direction, and object colours of the (simulator's) appearance family."""
    gray = rng.uniform(0.3, 0.7)
    table_color = [*(np.clip(gray + rng.normal(0, 0.05, 3), 0, 1)).tolist(), 1.0]
    tint = rng.uniform(0.85, 1.15, 3)
    light_scale = (tint / tint.mean() * rng.uniform(*config.light_intensity)).tolist()
    light_direction = [float(rng.uniform(-0.5, 0.5)), float(rng.uniform(0.2, 0.8)), -1.0]
    object_colors = {}
    for obj in spec.objects:
        jitter = rng.normal(0, config.color_jitter, 3)
        object_colors[obj.name] = [*np.clip(np.asarray(obj.color[:3]) + jitter, 0, 1).tolist(), obj.color[3]]
    return table_color, light_scale, light_direction, object_colors


def apply_to_rig_config(config: RigConfig, sample: EpisodeSample) -> RigConfig:
    """The rig config with this episode's lights, table colour and camera jitter."""
    update: dict = {}
    if sample.table_color:
        update["table"] = config.table.model_copy(update={"color": tuple(sample.table_color)})
    if sample.light_scale:
        lights = [light.model_copy(update={"color": tuple(np.asarray(light.color) * sample.light_scale)})
                  for light in config.lighting.directional]
        if lights and sample.light_direction:
            lights[0] = lights[0].model_copy(update={"direction": tuple(sample.light_direction)})
        update["lighting"] = config.lighting.model_copy(update={"directional": lights})
    if sample.camera_jitter:
        cameras = {}
        for name, camera in config.cameras.items():
            jitter = np.asarray(sample.camera_jitter.get(name, [0.0] * 6))
            eye = np.asarray(camera.eye) + jitter[:3]
            # turn the viewing direction by small angles: move the target sideways/up in the camera frame
            frame = look_at(camera.eye, camera.target, camera.up)
            distance = np.linalg.norm(np.asarray(camera.target) - np.asarray(camera.eye))
            target = (np.asarray(camera.target) + jitter[:3]
                      + distance * (jitter[4] * frame[:3, 2] + jitter[5] * frame[:3, 1]))
            cameras[name] = camera.model_copy(update={"eye": tuple(eye), "target": tuple(target)})
        update["cameras"] = cameras
    return config.model_copy(update=update)
