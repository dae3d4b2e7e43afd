"""Survey camera fit: pose error, reprojection error before/after and seconds per fit.

Synthetic: head views of the rig rendered from its nominal camera at random arm postures; the fit
starts from that pose perturbed by up to 5 cm and 5 degrees. Real: the RoboMIND clip (joints not
measured, so the arm model is posed at rest: the number shows how little a fit means without joints).
Inventory and grounding: every task's synthetic calibration (seeds 0 and 1: placements and look as
`datafarm synth-calibration` records them), scored against the simulator's own segmentation; the
negative control moves the placement range of the item the footage shows best so that it ends 10 cm
short of where the item stands.

    .venv/bin/python benchmarks/survey_fit.py [--trials 3] [--no-real]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

MATCH_SHARE = 0.5  # a detection is an object when this share of its head-view pixels are the object's
MIN_VISIBLE_PX = 40  # an object showing fewer pixels (hidden in a container, behind an arm) is not counted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--scenes", default=None, help="task:seed,... for the inventory (default: every task, seeds 0 and 1)")
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
    from datafarm.library import available_tasks

    scenes = args.scenes or ",".join(f"{task}:{seed}" for task in available_tasks() for seed in (0, 1))
    inventory_and_grounding(config, [(t, int(seed)) for t, seed in (x.split(":") for x in scenes.split(",") if x)])
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


def synthetic_episode(task: str, seed: int, config, folder: Path):
    """The calibration `datafarm synth-calibration --task` records (the task's scene at `seed`'s placements
    and look, the arms rolling their wrists in place), held in memory rather than encoded. Also the truth:
    each table item's centre and its visible pixels in the first head frame (the simulator's segmentation)."""
    from datafarm.calibration import CalibrationEpisode
    from datafarm.calibration.synth import InPlaceMotionExpert
    from datafarm.library import get_task
    from datafarm.sim.recorder import RecordedEpisode
    from datafarm.task.randomization import RandomizationConfig, sample_episode
    from datafarm.task.rollout import run_episode

    package = get_task(task)
    run_episode(package, seed=seed, record_dir=folder, wall_limit=None, expert=InPlaceMotionExpert(1.0))
    recording = RecordedEpisode.load(folder)
    legend = {int(k): v for k, v in recording.meta["segmentation_legend"].items()}
    segmentation = recording.frames("head")["segmentation"][0]
    sample = sample_episode(package.scene, seed, RandomizationConfig(), package.info.max_seconds, config.timing.control_hz,
                            package.info.recovery)  # as run_episode draws it
    truth = {}
    for item in [*package.scene.objects, *package.scene.fixtures]:
        if item.support == "table":
            ids = [i for i, name in legend.items() if name == item.name or name.startswith(item.name + "_")]
            truth[item.name] = ((sample.placements[item.name].x, sample.placements[item.name].y),
                                np.isin(segmentation, ids))
    frames = {name: recording.rgb(name) for name in recording.cameras}
    episode = CalibrationEpisode(folder, 30.0, frames, recording.data()["state"], True)
    return episode, truth, package


def match_by_mask(truth: dict, inventory: list) -> dict[str, int]:
    """Scene item -> inventory index: pairs where at least `MATCH_SHARE` of the detection's pixels are
    the item's, best first, each used once. A detection is right when it is (mostly) that object, wherever
    its centre was estimated and whatever share of the object it covers (a cabinet can come apart in two)."""
    pairs = []
    for name, (_, mask) in truth.items():
        for index, item in enumerate(inventory):
            pairs.append((np.logical_and(mask, item.mask).sum() / max(item.mask.sum(), 1), name, index))
    matched: dict[str, int] = {}
    for share, name, index in sorted(pairs, reverse=True):
        if share >= MATCH_SHARE and name not in matched and index not in matched.values():
            matched[name] = index
    return matched


def _scores(grounding) -> str:
    """Each object's mask IoU, cm outside its range and width against its render (round ones), as grounding scored them."""
    return "(" + ", ".join(f"{name} IoU {entry['iou']} {entry['position_error_cm']} cm, width x{entry['width_ratio']}"
                           for name, entry in grounding.report["objects"].items() if entry["found"]) + ")"


def inventory_and_grounding(config, scenes: list[tuple[str, int]]) -> None:
    from datafarm.survey.grounding import ground_scene_spec
    from datafarm.survey.run import rig_with_surveyed_cameras, survey_episode

    found = detected = total = rights = wrong_caught = 0
    errors = []
    for task, seed in scenes:
        with tempfile.TemporaryDirectory() as scratch:
            episode, truth, package = synthetic_episode(task, seed, config, Path(scratch) / "episode")
        result = survey_episode(episode, config)
        visible = {name: entry for name, entry in truth.items() if entry[1].sum() >= MIN_VISIBLE_PX}
        matched = match_by_mask(visible, result.inventory)
        errors += [float(np.linalg.norm(np.subtract(result.inventory[i].xy, visible[name][0]))) for name, i in matched.items()]
        found += len(matched)
        detected += len(result.inventory)
        total += len(visible)
        objects = [item.report("") for item in result.inventory]
        masks = {i: item.mask for i, item in enumerate(result.inventory)}
        surveyed = rig_with_surveyed_cameras(config, result.cameras)
        frames = list(episode.frames["head"])
        states = list(episode.state)
        right = ground_scene_spec(surveyed, package.scene, package.directory, objects, masks, frames, states,
                                  result.table.brightness)
        line = (f"{task} seed {seed}: {len(matched)}/{len(visible)} found, {len(result.inventory)} detected; grounding "
                f"right scene {'passes' if right.passed else 'FAILS ' + str(right.failures())} {_scores(right)}")
        if visible:  # negative control on the item the footage shows best
            moved = package.scene.model_copy(deep=True)
            shown = moved.item(max(visible, key=lambda name: visible[name][1].sum()))
            # the spec covers a placement range, so "moved" means the range ends 10 cm short of where it stands
            shown.xy = (truth[shown.name][0][0] - 0.10 - shown.randomize.x[1], shown.xy[1])
            wrong = ground_scene_spec(surveyed, moved, package.directory, objects, masks, frames, states,
                                      result.table.brightness)
            wrong_caught += not wrong.passed
            line += f", {shown.name} moved 10 cm {'FAILS' if not wrong.passed else 'passes'} {_scores(wrong)}"
        rights += right.passed
        print(line, flush=True)
    print(f"grounding on {len(scenes)} synthetic scenes: the right scene passes {rights}, an item moved 10 cm fails "
          f"{wrong_caught}")
    print(f"inventory on {len(scenes)} synthetic scenes: precision {found / max(detected, 1):.2f}, recall "
          f"{found / max(total, 1):.2f}, position error median {np.median(errors) * 100:.1f} cm, worst "
          f"{max(errors) * 100:.1f} cm")


if __name__ == "__main__":
    main()
