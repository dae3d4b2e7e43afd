"""The survey: head camera fitted to the arm silhouettes, table plane, offline object inventory.

Known truth: rig renders (the rig's own head camera) and the synthetic apple-on-scale calibration
(objects placed by the task's seed-0 sample). Real footage: the RoboMIND clip, whose joints are not
measured (the survey must say so). Every success check has a negative control."""

from __future__ import annotations

import numpy as np
import pytest

from datafarm.calibration import load_calibration, robomind_calibration_folder
from datafarm.library import get_task
from datafarm.sim.config import load_rig_config
from datafarm.survey.arm_points import ArmPoints
from datafarm.survey.camera import nominal_camera
from datafarm.survey.camera_fit import _keyframe, alignment_error, arm_mask, fit_camera, reprojection_error_px
from datafarm.survey.inventory import colour_word, find_objects_on_table, match_scene
from datafarm.survey.grounding import ground_scene_spec
from datafarm.survey.run import rig_with_surveyed_cameras, survey_episode

TABLE_VALUE = 152.0  # the rig's rendered table brightness (configs/rig colour under its lights)


@pytest.fixture(scope="module")
def rig_views(rig):
    """Three head views of the rig alone at varied arm postures: (images, states)."""
    rng = np.random.default_rng(7)
    images, states = [], []
    for _ in range(3):
        state = rig.rest_state()
        state[[0, 1, 2, 4, 7, 8, 9, 11]] += rng.uniform(-0.3, 0.3, 8)
        rig.reset(state)
        images.append(rig.capture(["head"])["head"].rgb)
        states.append(rig.qpos())
    rig.reset()
    return images, states


@pytest.mark.slow  # about 15-40 s of least squares on a busy machine
def test_a_perturbed_nominal_pose_is_corrected(rig_views):
    images, states = rig_views
    config = load_rig_config()
    truth = nominal_camera(config.cameras["head"])
    model = ArmPoints.from_rig(config)
    start = truth.perturbed([0.03, -0.025, 0.02], np.deg2rad([2.5, -2.0, 2.0]))  # 4.4 cm, 3.8 deg off
    fit = fit_camera(start, images, states, model, TABLE_VALUE)
    moved, turned = fit.camera.pose_error(truth)
    assert moved < 0.015 and turned < 1.5, (moved, turned)
    assert reprojection_error_px(fit.camera, truth, model, states) < 2.0
    assert fit.error_after_px < 1.5 < 4 < fit.error_before_px
    # negative control: the wrong (starting) pose aligns worse than the fitted one on every frame
    rng = np.random.default_rng(0)
    frames = [_keyframe(model.world(s, viewpoint=truth.eye), arm_mask(i, TABLE_VALUE), rng) for i, s in zip(images, states)]
    assert all(alignment_error(start, f) > alignment_error(fit.camera, f) + 2 for f in frames)


def test_the_arm_model_lands_on_the_arm_pixels_only_at_the_true_pose(rig_views):
    images, states = rig_views
    config = load_rig_config()
    truth = nominal_camera(config.cameras["head"])
    model = ArmPoints.from_rig(config)
    frame = _keyframe(model.world(states[0], viewpoint=truth.eye), arm_mask(images[0], TABLE_VALUE),
                      np.random.default_rng(0))
    assert alignment_error(truth, frame) < 1.5
    assert alignment_error(truth.perturbed([0.05, 0, 0], [0, 0, 0]), frame) > 5


def test_colour_words():
    assert [colour_word(c) for c in ([200, 30, 25], [40, 90, 200], [50, 170, 70], [240, 240, 235], [20, 20, 22])] == [
        "red", "blue", "green", "white", "black"]


def _painted_inventory(paint) -> list[str]:
    """Colour words of the inventory of a grey table (the head camera's view of it) with `paint(plate)` on it;
    pixels darker than the arm threshold are shade."""
    config = load_rig_config()
    camera = nominal_camera(config.cameras["head"])
    plate = np.full((camera.height, camera.width, 3), 150, dtype=np.uint8)
    paint(plate)
    table = np.ones(plate.shape[:2], dtype=bool)
    items = find_objects_on_table(plate, table, np.array([150.0, 150.0, 150.0]), camera, config.table.height,
                                  np.zeros_like(table), shade=arm_mask(plate, 150.0))
    return sorted(item.label.split()[1] for item in items)


def _disc(plate, centre, radius, colour):
    v, u = np.mgrid[:plate.shape[0], :plate.shape[1]]
    plate[(v - centre[1]) ** 2 + (u - centre[0]) ** 2 <= radius**2] = colour


def test_objects_touching_in_the_image_are_told_apart_by_colour_and_a_short_border():
    def bowls(plate):  # a blue bowl against a cream one, no gap between them
        _disc(plate, (150, 140), 12, (70, 160, 210))
        _disc(plate, (173, 140), 12, (235, 228, 200))
    assert _painted_inventory(bowls) == ["blue", "yellow"]

    def twins(plate):  # negative control: two touching blue discs are one blob (colour cannot split them)
        _disc(plate, (150, 140), 12, (70, 160, 210))
        _disc(plate, (173, 140), 12, (70, 160, 210))
    assert _painted_inventory(twins) == ["blue"]

    def cabinet_and_dark_box(plate):  # a lit top over its shaded front is one object; a dark box far away is one
        plate[100:118, 140:190] = (215, 205, 180)
        plate[118:140, 140:190] = (100, 95, 84)
        plate[160:175, 60:80] = (35, 35, 38)
    assert _painted_inventory(cabinet_and_dark_box) == ["black", "grey"]

    def drum(plate):  # two colours along a long border are the parts of one object: a yellow head on a red body
        plate[108:120, 130:180] = (230, 210, 120)
        plate[120:150, 130:180] = (190, 60, 50)
    assert len(_painted_inventory(drum)) == 1


@pytest.fixture(scope="module")
def apple_survey(synthetic_calibration):
    """The session's synthetic apple-on-scale calibration (about a minute) and its survey (about 20 s)."""
    episode = load_calibration(synthetic_calibration)
    return episode, survey_episode(episode, load_rig_config())


@pytest.mark.slow
def test_the_synthetic_scene_is_surveyed(apple_survey):
    episode, result = apple_survey
    head = result.cameras["head"]
    truth = nominal_camera(load_rig_config().cameras["head"])
    moved, turned = result.head_fit.camera.pose_error(truth)
    # this recording barely moves its arms (wrist roll only): a weaker fit than varied postures
    assert moved < 0.03 and turned < 3.0 and head["fit"]["alignment_px_after"] < 2.0
    assert result.table.height == pytest.approx(0.75) and result.table.extent["x_min"] < -0.3 < 0.3 < result.table.extent["x_max"]
    assert np.allclose(result.table.colour / 255, [0.61, 0.61, 0.61], atol=0.05)
    for name in ("left_wrist", "right_wrist"):
        assert result.cameras[name]["mount_check"]["table_iou"] > 0.7
    objects = [item.report("") for item in result.inventory]
    spec = get_task("apple_on_scale").scene
    matches = match_scene(spec, objects)
    assert matches["apple"]["found"] and matches["scale"]["found"], matches
    apple = objects[matches["apple"]["inventory_index"]]
    assert apple["colour"] == "red" and apple["size_m"]["width"] < 0.09
    # negative controls: objects that are not there are not found
    absent = get_task("nest_cups").scene
    assert sum(m["found"] for m in match_scene(absent, objects).values()) < len(absent.objects)
    assert not match_scene(spec, [])["apple"]["found"]


@pytest.mark.slow  # decodes a real clip and fits: about 30 s
def test_the_real_footage_is_surveyed_and_says_its_joints_are_not_measured(tmp_path):
    try:
        folder = robomind_calibration_folder(tmp_path / "real", seconds=1.0)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    result = survey_episode(load_calibration(folder), load_rig_config())
    fit = result.cameras["head"]["fit"]
    assert fit["focal_fitted"] and fit["alignment_px_before"] > 0 and fit["alignment_px_after"] > 0
    assert any("not measured" in w for w in result.warnings)
    kept = result.cameras["head"]["source"]
    assert kept == "rig nominal" or fit["alignment_px_after"] <= fit["alignment_px_before"]


def _ground(apple_survey, spec):
    """`spec` grounded in the synthetic apple-on-scale footage, from the first three keyframes."""
    episode, result = apple_survey
    objects = [item.report("") for item in result.inventory]
    masks = {i: item.mask for i, item in enumerate(result.inventory)}
    config = rig_with_surveyed_cameras(load_rig_config(), result.cameras)
    indices = episode.keyframe_indices(3)
    frames = [episode.frames["head"][i] for i in indices]
    states = [episode.state[i] for i in indices]
    return ground_scene_spec(config, spec, get_task("apple_on_scale").directory, objects, masks, frames, states,
                             result.table.brightness)


@pytest.mark.slow  # two scenes rendered at three keyframes: about 30 s
def test_grounding_passes_the_right_scene_and_fails_an_object_moved_10_cm(apple_survey):
    package = get_task("apple_on_scale")
    right = _ground(apple_survey, package.scene)
    assert right.passed, right.report
    assert right.report["arms"]["iou"] > 0.7 and right.report["objects"]["apple"]["iou"] > 0.3
    moved = package.scene.model_copy(deep=True)
    apple = moved.item("apple")
    apple.xy = (apple.xy[0] - 0.10, apple.xy[1])
    wrong = _ground(apple_survey, moved)
    assert not wrong.passed and not wrong.report["objects"]["apple"]["passed"] and wrong.report["objects"]["scale"]["passed"]
    assert any(f.startswith("apple") for f in wrong.failures())


@pytest.mark.slow  # one scene rendered at three keyframes: about 15 s
def test_grounding_fails_a_round_object_of_the_wrong_size_in_the_right_place(apple_survey):
    """Two bowls that differ only in size, swapped, stand where the scene's ranges allow: only the width in
    the footage tells them apart. Here: the scene's apple made 1.6 times as wide, where the real one is."""
    spec = get_task("apple_on_scale").scene.model_copy(deep=True)
    apple = spec.item("apple")
    apple.geometry.radius *= 1.6
    wrong = _ground(apple_survey, spec)
    report = wrong.report["objects"]["apple"]
    assert not wrong.passed and not report["passed"] and report["position_error_cm"] <= 3.0, report
    assert "times as wide" in report["reason"] and wrong.report["objects"]["scale"]["passed"]
