import json

import numpy as np
import pytest

from datafarm.sim.recorder import EpisodeRecorder, RecordedEpisode


def test_recording_writes_the_documented_layout_and_reads_back(fresh_rig, tmp_path):
    actions = [fresh_rig.rest_state() + 0.01 * i for i in range(8)]
    actions[3][1] = 9.0  # one clipped action
    with EpisodeRecorder(fresh_rig, tmp_path / "ep", metadata={"seed": 5}) as recorder:
        for action in actions:
            recorder.record(action)
    for relative in ["episode.json", "data.npz", "cameras/head/rgb.mp4", "cameras/left_wrist/frames.npz"]:
        assert (tmp_path / "ep" / relative).exists(), relative
    episode = RecordedEpisode.load(tmp_path / "ep")
    assert episode.meta["frames"] == 8 and episode.meta["seed"] == 5 and episode.meta["fps"] == 30
    data = episode.data()
    np.testing.assert_allclose(data["time"], np.arange(8) / 30)
    assert data["state"].shape == data["action"].shape == (8, 14)
    assert data["action"][3][1] == pytest.approx(3.14) and data["clipped"][3][1]
    np.testing.assert_allclose(data["state"][0], fresh_rig.rest_state(), atol=1e-5)
    rgb = episode.rgb("head")
    assert rgb.shape == (8, 240, 320, 3)
    frames = episode.frames("right_wrist")
    assert frames["depth"].shape == (8, 240, 320) and frames["depth"].max() > 0
    assert frames["extrinsics_cv"].shape == (8, 4, 4)
    legend = episode.meta["segmentation_legend"]
    assert {legend[str(i)] for i in np.unique(frames["segmentation"]) if i} >= {"right_link7", "right_link8"}
    assert np.array(json.loads((tmp_path / "ep" / "episode.json").read_text())["cameras"]["head"]["intrinsics"]).shape == (3, 3)


def test_a_failed_recording_leaves_nothing_behind(fresh_rig, tmp_path):
    with pytest.raises(RuntimeError):
        with EpisodeRecorder(fresh_rig, tmp_path / "ep") as recorder:
            recorder.record(fresh_rig.rest_state())
            raise RuntimeError("expert crashed")
    assert list(tmp_path.iterdir()) == []


def test_missing_episode_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="episode.json"):
        RecordedEpisode.load(tmp_path)
