import json
import os

import numpy as np
import pytest

from datafarm.cameras import CAMERA_KEYS, CAMERAS
from datafarm.dataset import HarvestError, HarvestItem, extendable, harvest
from datafarm.media import write_video
from datafarm.sim.recorder import EpisodeRecorder, RecordedEpisode
from datafarm.sim.spaces import AXIS_NAMES

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

INSTRUCTION = "place the apple on the scale"
RENDER_COLOUR = (200, 40, 90)


def _record(rig, directory, frames, offset):
    rig.reset()
    with EpisodeRecorder(rig, directory) as recorder:
        for i in range(frames):
            action = rig.rest_state().copy()
            action[0] += offset + 0.02 * i
            action[6] = 0.02 + 0.001 * i
            recorder.record(action)
    return directory


@pytest.fixture(scope="module")
def episodes(rig, tmp_path_factory):
    """Two short recorded episodes (12 and 9 frames) and solid-colour 'rendered' views for the second."""
    base = tmp_path_factory.mktemp("episodes")
    first = _record(rig, base / "000000", 12, 0.0)
    second = _record(rig, base / "000001", 9, -0.1)
    renders = {}
    for camera in CAMERAS:
        frame = np.zeros((240, 320, 3), np.uint8) + np.array(RENDER_COLOUR, np.uint8)
        renders[camera] = write_video(base / f"render_{camera}.mp4", [frame] * 9, fps=30)
    return first, second, renders


def test_harvest_writes_a_lerobot_dataset_that_reads_back(episodes, tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    first, second, renders = episodes
    calls = []
    items = [HarvestItem(first, None, 7), HarvestItem(second, renders, 9)]
    report = harvest(items, tmp_path / "dataset", "local/apple", 30, INSTRUCTION,
                     progress=lambda done, total: calls.append((done, total)),
                     metadata={"canonical_instruction": "put the apple on the scale"})
    assert calls == [(1, 2), (2, 2)]
    assert (report.episodes, report.frames, report.episode_map) == (2, 21, {0: 7, 1: 9})
    assert report.recorded_seconds == pytest.approx(21 / 30) and report.recorded_seconds_per_wall_second > 0
    assert not (tmp_path / "dataset.partial").exists()

    dataset = LeRobotDataset("local/apple", root=tmp_path / "dataset")
    assert dataset.fps == 30 and dataset.num_episodes == 2 and dataset.num_frames == 21
    assert set(dataset.meta.video_keys) == set(CAMERA_KEYS.values())
    assert list(dataset.meta.tasks.index) == [INSTRUCTION]
    for key in ("observation.state", "action"):
        assert dataset.features[key]["names"] == list(AXIS_NAMES)
        assert tuple(dataset.features[key]["shape"]) == (14,) and dataset.features[key]["dtype"] == "float32"
    columns = dataset.hf_dataset.with_format("numpy")
    episode_index = np.asarray(columns["episode_index"])
    for number, directory in enumerate([first, second]):
        recorded = RecordedEpisode.load(directory).data()
        rows = episode_index == number
        assert rows.sum() == len(recorded["action"])
        np.testing.assert_array_equal(np.stack(columns["action"])[rows], recorded["action"].astype(np.float32))
        np.testing.assert_array_equal(np.stack(columns["observation.state"])[rows],
                                      recorded["state"].astype(np.float32))

    # Frame 5 of episode 0 is the sim frame 5; episode 1's frames are the rendered (solid colour) views.
    sample = dataset[5]
    sim = RecordedEpisode.load(first).rgb("head")[5].astype(np.float32)
    decoded = sample[CAMERA_KEYS["head"]].permute(1, 2, 0).numpy() * 255
    assert decoded.shape == (240, 320, 3) and np.abs(decoded - sim).mean() < 6
    assert sample["task"] == INSTRUCTION
    rendered = dataset[12 + 4][CAMERA_KEYS["left_wrist"]].permute(1, 2, 0).numpy() * 255
    np.testing.assert_allclose(rendered.reshape(-1, 3).mean(axis=0), RENDER_COLOUR, atol=6)

    manifest = json.loads((tmp_path / "dataset" / "datafarm_harvest.json").read_text())
    assert [e["farm_index"] for e in manifest["episodes"]] == [7, 9]
    assert (manifest["task"], manifest["canonical_instruction"]) == (INSTRUCTION, "put the apple on the scale")


def test_a_video_shorter_than_the_episode_fails_and_leaves_nothing(episodes, tmp_path):
    first, _, renders = episodes  # the renders have 9 frames, the first episode 12
    with pytest.raises(HarvestError, match="has 9 frames but the episode has 12 rows"):
        harvest([HarvestItem(first, renders, 0)], tmp_path / "dataset", "local/x", 30, INSTRUCTION)
    assert list(tmp_path.iterdir()) == []


def test_bad_items_are_refused_before_anything_is_written(episodes, tmp_path):
    first, second, renders = episodes
    with pytest.raises(HarvestError, match="no rendered video for camera 'right_wrist'"):
        harvest([HarvestItem(second, {"head": renders["head"], "left_wrist": renders["left_wrist"]}, 3)],
                tmp_path / "d", "local/x", 30, INSTRUCTION)
    with pytest.raises(HarvestError, match="recorded at 30 fps, the dataset is 15 fps"):
        harvest([HarvestItem(first)], tmp_path / "d", "local/x", 15, INSTRUCTION)
    small = {c: write_video(tmp_path / f"{c}.mp4", [np.zeros((120, 160, 3), np.uint8)] * 9, fps=30)
             for c in CAMERAS}
    with pytest.raises(HarvestError, match="one dataset holds one size per camera"):
        harvest([HarvestItem(first), HarvestItem(second, small, 1)], tmp_path / "d", "local/x", 30, INSTRUCTION)
    with pytest.raises(HarvestError, match="episode.json"):
        harvest([HarvestItem(tmp_path / "nowhere")], tmp_path / "d", "local/x", 30, INSTRUCTION)
    (tmp_path / "taken").mkdir()
    with pytest.raises(HarvestError, match="already exists"):
        harvest([HarvestItem(first)], tmp_path / "taken", "local/x", 30, INSTRUCTION)
    assert not (tmp_path / "d").exists()


def _columns(root):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/apple", root=root)
    columns = dataset.hf_dataset.with_format("numpy")
    return dataset, {key: np.stack(columns[key]) for key in ("action", "observation.state")} | {
        "episode_index": np.asarray(columns["episode_index"])}


def test_a_top_up_appends_to_a_delivered_dataset_as_a_fresh_harvest_would_write_it(episodes, tmp_path):
    """lerobot's own resume appends the new episodes; the old files are copied, never re-encoded, and the
    result reads back as a harvest of every episode at once does."""
    first, second, renders = episodes
    metadata = {"canonical_instruction": "put the apple on the scale"}
    harvest([HarvestItem(first, None, 7)], tmp_path / "delivered", "local/apple", 30, INSTRUCTION, metadata=metadata)
    before = {p.relative_to(tmp_path / "delivered"): p.read_bytes() for p in (tmp_path / "delivered").rglob("*.mp4")}
    assert extendable(tmp_path / "delivered", "local/apple", 30, INSTRUCTION, metadata) == [7]

    report = harvest([HarvestItem(second, renders, 9)], tmp_path / "grown", "local/apple", 30, INSTRUCTION,
                     metadata=metadata, extend=tmp_path / "delivered")
    assert (report.episodes, report.frames, report.episode_map) == (1, 9, {1: 9})
    harvest([HarvestItem(first, None, 7), HarvestItem(second, renders, 9)], tmp_path / "fresh", "local/apple", 30,
            INSTRUCTION, metadata=metadata)
    grown, grown_columns = _columns(tmp_path / "grown")
    fresh, fresh_columns = _columns(tmp_path / "fresh")
    assert grown.num_episodes == 2 and grown.num_frames == fresh.num_frames == 21
    for key in fresh_columns:
        np.testing.assert_array_equal(grown_columns[key], fresh_columns[key])
    for index in (5, 12 + 4):  # a frame of the kept episode and one of the appended one
        for key in CAMERA_KEYS.values():
            np.testing.assert_allclose(grown[index][key].numpy(), fresh[index][key].numpy(), atol=2 / 255)
    for relative, content in before.items():  # the delivered videos were copied as they were
        assert (tmp_path / "grown" / relative).read_bytes() == content
    manifest = json.loads((tmp_path / "grown" / "datafarm_harvest.json").read_text())
    assert [(e["lerobot_episode"], e["farm_index"]) for e in manifest["episodes"]] == [(0, 7), (1, 9)]
    assert extendable(tmp_path / "delivered", "local/apple", 30, INSTRUCTION, metadata) == [7]  # left as it was

    # anything written differently is not extended: the caller harvests every episode afresh
    assert extendable(tmp_path / "delivered", "local/apple", 30, "another task", metadata) == []
    assert extendable(tmp_path / "delivered", "local/apple", 30, INSTRUCTION, {"canonical_instruction": "x"}) == []
    assert extendable(tmp_path / "nowhere", "local/apple", 30, INSTRUCTION, metadata) == []
    with pytest.raises(HarvestError, match="is not a dataset harvested with these settings"):
        harvest([HarvestItem(second, renders, 9)], tmp_path / "other", "local/apple", 15, INSTRUCTION,
                metadata=metadata, extend=tmp_path / "delivered")
    assert not (tmp_path / "other").exists()
