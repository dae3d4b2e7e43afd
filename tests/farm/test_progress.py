"""Progress comes from the workspace's own records, so any run on the workspace can be followed."""

import json

import pytest

from cli.progress import farm_progress
from datafarm.cameras import CAMERAS
from datafarm.farm.episodes import ATTEMPTS, episode_dir
from datafarm.farm.progress import FarmProgress, read_progress, record_harvest_progress
from datafarm.workspace import Workspace
from datafarm.workspace.jsonl import append_jsonl


@pytest.fixture
def workspace(tmp_path):
    return Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 3}})


def keep(workspace, index, rendered=False, admitted=None):
    """The files a kept (and maybe rendered and reviewed) episode leaves."""
    workspace.write_json(f"{episode_dir(index)}/result.json", {"seed": index, "index": index})
    workspace.write_json(f"{episode_dir(index)}/sim/episode.json", {"fps": 30})
    if rendered:
        for camera in CAMERAS:
            workspace.write_bytes(f"{episode_dir(index)}/render/{camera}.mp4", b"video")
    if admitted is not None:
        workspace.write_json(f"{episode_dir(index)}/review.json", {"admitted": admitted})


def test_progress_counts_each_phase_from_the_records(workspace):
    assert read_progress(workspace) == FarmProgress(3, 0, 0, 0, 0, 0, 0)
    for seed, accepted in enumerate([True, False, True, True]):
        append_jsonl(workspace.path(ATTEMPTS), {"seed": seed, "accepted": accepted, "reason": ""})
    keep(workspace, 0, rendered=True, admitted=True)
    keep(workspace, 1, rendered=True, admitted=False)
    keep(workspace, 2)
    workspace.write_bytes(f"{episode_dir(3)}/result.json", b"{}")  # a kill before its sim finished: not kept
    assert read_progress(workspace) == FarmProgress(target=3, tried=4, kept=3, rendered=2, reviewed=2, admitted=1,
                                                    harvested=0)
    record_harvest_progress(workspace, 1, 2)
    assert read_progress(workspace).harvested == 1
    workspace.write_json("manifest.json", {"episodes": [0, 2]})  # the finished delivery supersedes it
    assert read_progress(workspace).harvested == 2


def test_progress_bars_show_the_workspace_after_the_block(workspace, capsys):
    keep(workspace, 0, rendered=True, admitted=True)
    with farm_progress(workspace.root, interval=0.05):
        keep(workspace, 1, rendered=True, admitted=True)
    shown = capsys.readouterr().err
    assert "rollout" in shown and "2/3" in shown and "admitted, 2 reviewed" in shown
    assert json.loads(workspace.path(f"{episode_dir(1)}/review.json").read_text())["admitted"]
