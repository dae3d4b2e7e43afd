"""Survey camera fit: pose error, reprojection error before/after and seconds per fit.

Synthetic: head views of the rig rendered from its nominal camera at random arm postures; the fit
starts from that pose perturbed by up to 5 cm and 5 degrees. Real: the RoboMIND clip (joints not
measured, so the arm model is posed at rest: the number shows how little a fit means without joints).

    .venv/bin/python benchmarks/survey_fit.py [--trials 3] [--no-real]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--scenes", default="apple_on_scale:1,nest_cups:0", help="task:seed,... for the inventory")
    parser.add_argument("--no-real", action="store_true")
    args = parser.parse_args()

    from datafarm.sim.config import load_rig_config
    from datafarm.sim.rig import DualArmRig
    from datafarm.survey.arm_points import ArmPoints
    from datafarm.survey.camera import nominal_camera
    from datafarm.survey.camera_fit import fit_camera, reprojection_error_px

    config = load_rig_config()
    rig = DualArmRig.create(config)
    truth = nominal_camera(config.cameras["head"])
    model = ArmPoints.from_rig(config)
    rng = np.random.default_rng(2026)
    rows = []
    for trial in range(args.trials):
        images, states = [], []
        for _ in range(3):
            state = rig.rest_state()
            state[[0, 1, 2, 4, 7, 8, 9, 11]] += rng.uniform(-0.3, 0.3, 8)
            rig.reset(state)
            images.append(rig.capture(["head"])["head"].rgb)
            states.append(rig.qpos())
        shift = rng.normal(size=3)
        turn = rng.normal(size=3)
        start = truth.perturbed(shift / np.linalg.norm(shift) * rng.uniform(0.02, 0.05),
                                turn / np.linalg.norm(turn) * np.deg2rad(rng.uniform(2, 5)))
        started = time.perf_counter()
        fit = fit_camera(start, images, states, model, 152.0)
        seconds = time.perf_counter() - started
        moved0, turned0 = start.pose_error(truth)
        moved, turned = fit.camera.pose_error(truth)
        rows.append((moved0, turned0, moved, turned, reprojection_error_px(start, truth, model, states),
                     reprojection_error_px(fit.camera, truth, model, states), fit.error_before_px,
                     fit.error_after_px, seconds))
        print(f"trial {trial}: start {moved0 * 100:.1f} cm {turned0:.1f} deg -> fitted {moved * 100:.2f} cm "
              f"{turned:.2f} deg; reprojection {rows[-1][4]:.1f} -> {rows[-1][5]:.2f} px; alignment "
              f"{fit.error_before_px:.1f} -> {fit.error_after_px:.2f} px; {seconds:.1f} s")
    table = np.array(rows)
    if rows:
        print(f"synthetic, {len(rows)} fits: position error median {np.median(table[:, 2]) * 100:.2f} cm, worst "
              f"{table[:, 2].max() * 100:.2f} cm; rotation median {np.median(table[:, 3]):.2f} deg, worst "
              f"{table[:, 3].max():.2f} deg; reprojection median {np.median(table[:, 4]):.1f} -> "
              f"{np.median(table[:, 5]):.2f} px; {np.mean(table[:, 8]):.1f} s per fit")
    inventory_and_grounding(config, [(t, int(seed)) for t, seed in (x.split(":") for x in args.scenes.split(",") if x)])
    if args.no_real:
        return
    from datafarm.calibration import load_calibration, robomind_calibration_folder
    from datafarm.survey.run import survey_episode

    with tempfile.TemporaryDirectory() as scratch:
        folder = robomind_calibration_folder(Path(scratch) / "real", seconds=1.0)
        started = time.perf_counter()
        result = survey_episode(load_calibration(folder), config)
        fit = result.cameras["head"]["fit"]
        print(f"real (RoboMIND AX-PackPlate, joints not measured): arm alignment {fit['alignment_px_before']:.1f} -> "
              f"{fit['alignment_px_after']:.1f} px, focal {fit['focal_px']:.0f} px, pose kept: "
              f"{result.cameras['head']['source']}; {len(result.inventory)} objects; "
              f"survey {time.perf_counter() - started:.1f} s")


def synthetic_episode(task: str, seed: int, config):
    """A 3-frame calibration episode rendered in memory: the task's scene (seed's placements), rest pose."""
    from datafarm.calibration import CalibrationEpisode
    from datafarm.library import get_task
    from datafarm.scene.builder import build_scene
    from datafarm.sim.rig import DualArmRig
    from datafarm.task.randomization import RandomizationConfig, sample_episode

    package = get_task(task)
    sample = sample_episode(package.scene, seed, RandomizationConfig(), 60.0, config.timing.control_hz)
    rig = DualArmRig.create(config)
    build_scene(rig, package.scene, sample.placements, package.directory)
    frames = {name: [] for name in config.cameras}
    for _ in range(3):
        for name, frame in rig.capture().items():
            frames[name].append(frame.rgb)
    state = np.repeat(rig.qpos()[None], 3, axis=0)
    truth = {item.name: (sample.placements[item.name].x, sample.placements[item.name].y)
             for item in [*package.scene.objects, *package.scene.fixtures] if item.support == "table"}
    episode = CalibrationEpisode(Path(f"memory:{task}"), 30.0, {k: np.stack(v) for k, v in frames.items()}, state, True)
    return episode, truth, package


def inventory_and_grounding(config, scenes: list[tuple[str, int]]) -> None:
    from datafarm.survey.grounding import ground_scene_spec
    from datafarm.survey.run import rig_with_surveyed_cameras, survey_episode

    found = detected = total = 0
    errors = []
    for task, seed in scenes:
        episode, truth, package = synthetic_episode(task, seed, config)
        result = survey_episode(episode, config)
        positions = [np.array(item.xy) for item in result.inventory]
        used = set()
        for name, xy in truth.items():
            gaps = [(np.linalg.norm(p - xy), i) for i, p in enumerate(positions) if i not in used]
            if gaps and min(gaps)[0] <= 0.05:
                used.add(min(gaps)[1])
                errors.append(min(gaps)[0])
        found += len(used)
        detected += len(positions)
        total += len(truth)
        objects = [item.report("") for item in result.inventory]
        masks = {i: item.mask for i, item in enumerate(result.inventory)}
        surveyed = rig_with_surveyed_cameras(config, result.cameras)
        frames = list(episode.frames["head"])
        states = list(episode.state)
        right = ground_scene_spec(surveyed, package.scene, package.directory, objects, masks, frames, states,
                                  result.table.brightness)
        moved = package.scene.model_copy(deep=True)
        first = next(item for item in [*moved.objects, *moved.fixtures] if item.support == "table")
        first.xy = (first.xy[0] - 0.10, first.xy[1])
        wrong = ground_scene_spec(surveyed, moved, package.directory, objects, masks, frames, states,
                                  result.table.brightness)
        print(f"{task} seed {seed}: {len(used)}/{len(truth)} found, {len(positions)} detected; grounding right scene "
              f"{'passes' if right.passed else 'FAILS ' + str(right.failures())}, {first.name} moved 10 cm {'FAILS' if not wrong.passed else 'passes'}")
    print(f"inventory on {len(scenes)} synthetic scenes: precision {found / max(detected, 1):.2f}, recall "
          f"{found / max(total, 1):.2f}, position error median {np.median(errors) * 100:.1f} cm, worst "
          f"{max(errors) * 100:.1f} cm")


if __name__ == "__main__":
    main()
