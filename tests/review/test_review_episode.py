"""Episode review: a good composite render is admitted; corrupted renders are rejected by the right check."""

import json
import shutil

import numpy as np
import pytest

from datafarm.media import read_video, write_video
from datafarm.render import get_renderer, sample_appearance
from datafarm.render.views import ROBOT, TABLE, class_maps, load_camera_arrays
from datafarm.review import ReviewThresholds, review_episode

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def good_render(sim_episode, references, tmp_path_factory):
    return get_renderer("composite").render(sim_episode, references, sample_appearance(2),
                                            tmp_path_factory.mktemp("good"))


@pytest.fixture(scope="module")
def verdict(sim_episode, tmp_path_factory):
    return json.loads((sim_episode.directory.parent / "verdict.json").read_text())


def _corrupt(good: dict, tmp_path, camera: str, change) -> dict:
    """A copy of the good render with one camera's frames passed through `change` (or its bytes replaced)."""
    paths = {}
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, path in good.items():
        paths[name] = shutil.copy(path, tmp_path / path.name)
    target = tmp_path / f"{camera}.mp4"
    if change == "garbage":
        data = bytearray(target.read_bytes())
        rng = np.random.default_rng(0)
        target.write_bytes(bytes(rng.permutation(np.frombuffer(bytes(data), np.uint8))))
    else:
        write_video(target, change(read_video(good[camera])), 30)
    return {name: type(good[name])(path) for name, path in paths.items()}


def test_good_composite_render_is_admitted(sim_episode, good_render, verdict):
    assert verdict["success"]
    review = review_episode(sim_episode, good_render, verdict)
    assert review.admitted, review.reasons
    record = review.to_dict()
    assert record["admitted"] and record["reasons"] == []
    names = {check["name"] for check in record["checks"]}
    assert {"timestamps", "frame_count", "fps", "decodes", "black_frames", "blank_frames", "frozen_frames",
            "robot_mask_iou", "static_flicker", "judge_verdict"} <= names
    head_iou = next(c for c in review.checks if c.name == "robot_mask_iou" and c.camera == "head")
    assert head_iou.value is not None and head_iou.value > 0.75
    json.dumps(record)  # review.json is plain JSON


def _robot_iou(review, camera):
    return next(c for c in review.checks if c.name == "robot_mask_iou" and c.camera == camera)


def test_low_contrast_robot_is_admitted(sim_episode, good_render, verdict, tmp_path):
    """Regression: a correct render whose robot is drawn ~12 levels off the surface behind it (a grey gripper
    on grey concrete in a farm run: IoU 0.02 at the fixed level 30) is admitted; the level adapts to the
    view's background-estimate error. The fixed level of 30 is kept as the ceiling and still rejects it."""
    classes = class_maps(sim_episode, load_camera_arrays(sim_episode, "head")["segmentation"])

    def faint_robot(frames):
        frames = frames.astype(np.int16)
        count = min(len(frames), len(classes))
        surface = classes[:count] <= TABLE
        behind = np.zeros(frames.shape[1:], np.float64)  # per pixel: mean colour while the sim shows table/floor
        seen = surface.sum(axis=0)
        for t in range(count):
            behind[surface[t]] += frames[t][surface[t]]
        behind = np.where(seen[..., None] > 0, behind / np.maximum(seen, 1)[..., None], np.nan)
        for t in range(count):
            faint = (classes[t] == ROBOT) & (seen > 0)
            frames[t][faint] = np.clip(behind[faint] + 12, 0, 255)
        return frames.astype(np.uint8)

    faint = _corrupt(good_render, tmp_path, "head", faint_robot)
    review = review_episode(sim_episode, faint, verdict)
    assert review.admitted, review.reasons
    adaptive = _robot_iou(review, "head")
    assert adaptive.value is not None and adaptive.value > 0.7, adaptive.describe()
    fixed = _robot_iou(review_episode(sim_episode, faint, verdict, ReviewThresholds(robot_difference_min_level=30.0)),
                       "head")
    assert fixed.value is not None and fixed.value < 0.6, fixed.describe()  # what the fixed level made of it


def _black(frames):
    frames = frames.copy()
    frames[5:8] = 0
    return frames


def _frozen(frames):
    frames = frames.copy()
    frames[10:30] = frames[10]
    return frames


def _flicker(frames):
    gains = 1 + 0.08 * np.where(np.arange(len(frames)) % 2 == 0, 1, -1)
    return np.clip(frames * gains[:, None, None, None], 0, 255).astype(np.uint8)


def _shifted(frames):
    return np.roll(frames, (40, 60), axis=(1, 2))


@pytest.mark.parametrize("camera, change, failing", [
    ("head", _black, "black_frames"),
    ("left_wrist", _frozen, "frozen_frames"),
    ("head", "garbage", "decodes"),
    ("right_wrist", lambda frames: frames[:-4], "frame_count"),
    ("head", _flicker, "static_flicker"),
    ("head", _shifted, "robot_mask_iou"),
    ("head", lambda frames: frames[::-1], "robot_mask_iou"),
])
def test_corrupted_render_is_rejected_by_the_right_check(sim_episode, good_render, verdict, tmp_path, camera,
                                                         change, failing):
    corrupted = _corrupt(good_render, tmp_path, camera, change)
    review = review_episode(sim_episode, corrupted, verdict)
    assert not review.admitted
    failed = [(c.name, c.camera) for c in review.checks if not c.passed]
    assert (failing, camera) in failed, review.reasons
    assert any(reason.startswith(f"{failing}[{camera}]") for reason in review.reasons)


def _as_generated(paths: dict, frames: int) -> list[int]:
    """Mark a render's folder as a video model's output, with two chunk seams."""
    seams = [frames // 3, 2 * frames // 3]
    (next(iter(paths.values())).parent / "generation.json").write_text(json.dumps({"renderer": "test", "seams": seams}))
    return seams


def _step_at_second_seam(frames):
    frames = frames.astype(np.int16)
    frames[2 * len(frames) // 3:] += 30  # the last chunk came out brighter
    return np.clip(frames, 0, 255).astype(np.uint8)


def _drifting(frames):
    gain = np.linspace(1.0, 1.25, len(frames))[:, None, None, None]
    return np.clip(frames * gain, 0, 255).astype(np.uint8)


def _shifted_8px(frames):
    return np.roll(frames, (8, 8), axis=(1, 2))  # the scene drawn off where the sim has it


def test_a_generated_render_is_held_to_the_seam_drift_and_edge_checks(sim_episode, good_render, verdict, tmp_path):
    frames = len(read_video(good_render["head"]))
    good = _corrupt(good_render, tmp_path / "good", "left_wrist", lambda f: f)
    _as_generated(good, frames)
    review = review_episode(sim_episode, good, verdict)
    assert review.admitted, review.reasons
    head = {c.name: c for c in review.checks if c.camera == "head"}
    assert head["seam_jump"].value is not None and head["seam_jump"].value < 2.5, head["seam_jump"].describe()
    assert head["colour_drift"].value is not None and head["colour_drift"].value < 3.0, head["colour_drift"].describe()
    assert head["edge_agreement"].value is not None and head["edge_agreement"].value > 0.7, head["edge_agreement"].describe()
    assert not any(c.name == "seam_jump" for c in review_episode(sim_episode, good_render, verdict).checks)
    for change, failing in ((_step_at_second_seam, "seam_jump"), (_drifting, "colour_drift"),
                            (_shifted_8px, "edge_agreement")):
        corrupted = _corrupt(good_render, tmp_path / failing, "head", change)
        _as_generated(corrupted, frames)
        review = review_episode(sim_episode, corrupted, verdict)
        assert ("head", failing) in [(c.camera, c.name) for c in review.checks if not c.passed], review.reasons


def test_failed_judge_and_missing_view_are_rejected(sim_episode, good_render):
    review = review_episode(sim_episode, good_render, {"success": False, "reason": "failed: apple_on_scale"})
    assert not review.admitted and review.failed() == ["judge_verdict"]
    partial = {k: v for k, v in good_render.items() if k != "right_wrist"}
    review = review_episode(sim_episode, partial, {"success": True}, ReviewThresholds())
    assert review.failed() == ["views_present"]
