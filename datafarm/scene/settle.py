"""Settle check: a scene whose objects move more than a few mm in their first second is rejected."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datafarm.scene.builder import build_scene
from datafarm.sim.config import load_rig_config
from datafarm.sim.rig import DualArmRig
from datafarm.task.package import TaskPackage
from datafarm.task.randomization import RandomizationConfig, sample_episode

SETTLE_TOLERANCE = 0.005  # m


@dataclass(frozen=True)
class SettleReport:
    ok: bool
    drift: dict[str, float]  # m, per object, over the first second
    message: str


def settle_check(package: TaskPackage, seed: int = 0, seconds: float = 1.0,
                 tolerance: float = SETTLE_TOLERANCE) -> SettleReport:
    """Build the scene for `seed` (geometry randomized), hold the arms still, and measure drift."""
    config = load_rig_config().model_copy(update={"cameras": {}})
    sample = sample_episode(package.scene, seed, RandomizationConfig(execution=False, appearance=False,
                                                                      camera=False), package.info.max_seconds,
                            config.timing.control_hz)
    rig = DualArmRig.create(config)
    scene = build_scene(rig, package.scene, sample.placements, package.directory, sample.fixture_params)
    for fixture in scene.fixtures.values():
        rig.substep_hooks.append(fixture.after_substep)
    start = {name: obj.pose()[:3, 3].copy() for name, obj in scene.objects.items()}
    for _ in range(int(seconds * config.timing.control_hz)):
        rig.step(rig.drive_target())
    drift = {name: float(np.linalg.norm(obj.pose()[:3, 3] - start[name])) for name, obj in scene.objects.items()}
    moving = {name: d for name, d in drift.items() if d > tolerance}
    if moving:
        shown = ", ".join(f"{n} {d * 1000:.1f} mm" for n, d in moving.items())
        return SettleReport(False, drift, f"{package.name}: objects moved in the first {seconds:g} s: {shown} "
                                          f"(tolerance {tolerance * 1000:.0f} mm); check supports and overlaps in scene.yaml")
    return SettleReport(True, drift, "settled")
