"""The calibration sources: a synthetic LeRobot episode from the rig, and real RoboMIND footage."""

import json
import os
import shutil

import numpy as np
import pytest

from datafarm.calibration import (
    CalibrationError,
    appearance_references,
    load_calibration,
    robomind_calibration_folder,
    synth_calibration,
)
from datafarm.calibration.robomind import robomind_dir
from datafarm.cameras import CAMERA_KEYS, CAMERAS
from datafarm.dataset import HarvestItem, harvest
from datafarm.sim.recorder import EpisodeRecorder

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def _have_robomind() -> bool:
    try:
        robomind_dir()
    except FileNotFoundError:
        return False
    return True


needs_robomind = pytest.mark.skipif(not _have_robomind(), reason="RoboMIND clips (shared/data/agilex_robomind) absent")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return synth_calibration(tmp_path_factory.mktemp("synth") / "calibration", seconds=0.5)


def test_a_synthetic_calibration_is_a_labelled_one_episode_lerobot_dataset(synthetic):
    info = json.loads((synthetic / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 30 and info["total_episodes"] == 1
    assert info["features"]["action"]["names"] == info["features"]["observation.state"]["names"]
    provenance = json.loads((synthetic / "datafarm_calibration.json").read_text())
    assert provenance["synthetic"] is True and provenance["source"] == "datafarm synth-calibration"
    episode = load_calibration(synthetic)
    assert episode.synthetic and episode.fps == 30 and episode.num_frames == 15
    assert episode.meta["tasks"] == ["calibration"] and episode.meta["format"] == "lerobot"
    assert {c: f.shape for c, f in episode.frames.items()} == {c: (15, 240, 320, 3) for c in CAMERAS}
    assert episode.state.shape == (15, 14)
    assert episode.frames["head"].std() > 5  # rendered content, not a blank stream


def _edited_copy(source, tmp_path, edit):
    copy = tmp_path / "edited"
    shutil.copytree(source, copy)
    info_file = copy / "meta" / "info.json"
    info = json.loads(info_file.read_text())
    edit(info)
    info_file.write_text(json.dumps(info))
    return copy


def test_lerobot_datasets_without_a_camera_or_with_a_wrong_state_width_are_refused(synthetic, tmp_path):
    no_camera = _edited_copy(synthetic, tmp_path / "a", lambda i: i["features"].pop(CAMERA_KEYS["left_wrist"]))
    with pytest.raises(CalibrationError, match="camera 'left_wrist' is missing: no feature"):
        load_calibration(no_camera)

    def narrow(info):
        info["features"]["observation.state"]["shape"] = [13]

    with pytest.raises(CalibrationError, match=r"has shape \(13,\), expected \(14,\)"):
        load_calibration(_edited_copy(synthetic, tmp_path / "b", narrow))


def test_a_dataset_with_two_episodes_is_refused(rig, tmp_path):
    items = []
    for number in range(2):
        rig.reset()
        with EpisodeRecorder(rig, tmp_path / f"ep{number}") as recorder:
            for _ in range(3):
                recorder.record(rig.rest_state())
        items.append(HarvestItem(tmp_path / f"ep{number}", None, number))
    harvest(items, tmp_path / "two", "local/two", 30, "calibration")
    with pytest.raises(CalibrationError, match="has 2 episodes, a calibration is exactly one episode"):
        load_calibration(tmp_path / "two")


@needs_robomind
def test_ingest_works_on_real_footage(tmp_path):
    folder = robomind_calibration_folder(tmp_path / "real", seconds=1.0)
    readme = (folder / "README.txt").read_text()
    assert "REAL" in readme and "NOT wrist cameras" in readme and "NOT measured" in readme
    episode = load_calibration(folder)
    assert not episode.synthetic and episode.meta["real_streams"] == ["head"]
    assert episode.fps == pytest.approx(30) and episode.num_frames == 30
    assert {c: f.shape for c, f in episode.frames.items()} == {c: (30, 240, 320, 3) for c in CAMERAS}
    assert not np.array_equal(episode.frames["head"], episode.frames["left_wrist"])
    assert np.ptp(episode.state, axis=0).max() == 0  # the rest pose, repeated
    plate = episode.background_plate("head")
    assert plate.shape == (240, 320, 3) and plate.std() > 10  # a real scene, not a flat image


@needs_robomind
def test_appearance_references_are_real_frames_from_the_clips():
    references = appearance_references(3)
    assert len(references) == 3
    for frame in references:
        assert frame.shape == (368, 640, 3) and frame.dtype == np.uint8 and frame.std() > 10
    assert not np.array_equal(references[0], references[1])


@pytest.mark.slow
def test_a_synthetic_calibration_can_show_a_task_scene(tmp_path):
    episode = load_calibration(synth_calibration(tmp_path / "apple", task="apple_on_scale", seconds=1.0))
    assert episode.synthetic and episode.meta["task"] == "apple_on_scale" and episode.num_frames == 30
    wrist_roll = episode.state[:, 5]
    assert np.ptp(wrist_roll) > 0.3  # the wrists really turned
