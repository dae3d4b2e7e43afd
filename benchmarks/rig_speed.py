"""Rig speed: physics steps per second, recorded three-camera frames per second, real-time factor.

Runs pinned to one CPU core by default (as one rollout worker would be). Prints a table.
    python benchmarks/rig_speed.py [--cores N] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from datafarm.sim.config import RenderSettings, load_rig_config
from datafarm.sim.recorder import EpisodeRecorder
from datafarm.sim.rig import DualArmRig
from datafarm.sim.show import scripted_actions


def physics_rate(seconds: float) -> float:
    rig = DualArmRig.create()
    actions = scripted_actions(rig)
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        rig.step(actions[steps % len(actions)])
        steps += 1
    return steps * rig.config.timing.substeps / (time.perf_counter() - start)


def recording_rate(resolution: tuple[int, int], render: RenderSettings, frames: int) -> tuple[float, float]:
    config = load_rig_config(resolution=resolution).model_copy(update={"render": render})
    rig = DualArmRig.create(config)
    rig.capture()  # compile shaders outside the timing
    actions = scripted_actions(rig)[:frames]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with EpisodeRecorder(rig, Path(tmp) / "episode") as recorder:
            for action in actions:
                recorder.record(action)
        wall = time.perf_counter() - start
    fps = len(actions) / wall
    return fps, fps / rig.config.timing.control_hz


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cores", type=int, default=1, help="CPU cores to pin to (0: no pinning)")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of the physics measurement")
    parser.add_argument("--frames", type=int, default=150, help="frames per recording measurement")
    args = parser.parse_args()
    if args.cores:
        os.sched_setaffinity(0, set(range(args.cores)))
    cores = len(os.sched_getaffinity(0))
    print(f"rig speed on {cores} core(s), control 30 Hz, physics 300 Hz\n")
    print(f"physics: {physics_rate(args.seconds):,.0f} steps/s (two arms, PD drives, gravity compensation)\n")
    print(f"{'cameras':<9}{'resolution':<12}{'shader':<9}{'shadows':<9}{'frames/s':>9}{'ms/frame':>10}{'real-time x':>13}")
    # The capture is lavapipe rasterizing: its cost follows the pixel count and the work per pixel.
    renders = [RenderSettings(shader="lean"), RenderSettings(shader="minimal"),
               RenderSettings(shader="minimal", shadows=True)]
    for resolution in [(160, 120), (320, 240), (640, 480)]:
        for render in renders:
            fps, realtime = recording_rate(resolution, render, args.frames)
            print(f"{'3':<9}{f'{resolution[0]}x{resolution[1]}':<12}{render.shader:<9}{str(render.shadows):<9}"
                  f"{fps:>9.1f}{1000 / fps:>10.1f}{realtime:>13.2f}")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
