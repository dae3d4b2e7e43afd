"""The delivered dataset's task string is the user's request; the canonical instruction is metadata."""

import json

import numpy as np
import pytest

from datafarm.farm.deliver import harvest, verify
from datafarm.cameras import CAMERAS
from datafarm.farm.episodes import episode_dir
from datafarm.farm.progress import read_progress
from datafarm.media import write_video
from datafarm.sim.recorder import EpisodeRecorder
from datafarm.workspace import Workspace

pytestmark = pytest.mark.slow  # lerobot's writer and reader

REQUEST = "Could you put the red apple\non the kitchen scale, please?  "
CANONICAL = "place the apple on the scale"


@pytest.fixture
def reviewed_workspace(rig, tmp_path):
    """A workspace with one kept, rendered, admitted episode (what harvest reads), made by hand."""
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1}, "task": "apple_on_scale"})
    workspace.write_text("request.txt", REQUEST)
    workspace.write_json("contract.json", {"instruction": CANONICAL})
    rig.reset()
    with EpisodeRecorder(rig, workspace.path(episode_dir(0), "sim")) as recorder:
        for _ in range(6):
            recorder.record(rig.rest_state().copy())
    workspace.write_json(f"{episode_dir(0)}/result.json", {"seed": 0, "index": 0})
    render = workspace.path(episode_dir(0), "render")
    render.mkdir(parents=True)
    for camera in CAMERAS:
        write_video(render / f"{camera}.mp4", [np.full((240, 320, 3), 90, np.uint8)] * 6, fps=30)
    workspace.write_json(f"{episode_dir(0)}/review.json", {"index": 0, "seed": 0, "admitted": True, "reasons": []})
    return workspace


def test_the_dataset_carries_the_request_and_keeps_the_instruction_as_metadata(reviewed_workspace):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    workspace = reviewed_workspace
    assert read_progress(workspace).harvested == 0
    harvest(workspace)
    request = "Could you put the red apple on the kitchen scale, please?"
    dataset = LeRobotDataset("datafarm/episodes", root=workspace.path("dataset"))
    assert list(dataset.meta.tasks.index) == [request]
    assert dataset[0]["task"] == request != CANONICAL
    meta = json.loads(workspace.path("dataset", "datafarm_harvest.json").read_text())
    assert (meta["task"], meta["canonical_instruction"]) == (request, CANONICAL)
    manifest = json.loads(workspace.path("manifest.json").read_text())
    assert (manifest["request"], manifest["canonical_instruction"]) == (request, CANONICAL)
    assert verify(workspace).ok
    assert read_progress(workspace).harvested == 1
