"""One test over the whole registry, the way a user starts: each built-in task from its own synthetic
calibration (`datafarm synth-calibration --task T`), prepared, surveyed and built. The build grounds the
scene against that footage; a task whose scene fails grounding, or whose package files do not reach the
workspace (a mesh), cannot be farmed at all. The negative control (an item moved 10 cm fails grounding)
is tests/survey/test_survey.py's and `benchmarks/survey_fit.py`'s, per task."""

from __future__ import annotations

import pytest

from datafarm.calibration import synth_calibration
from datafarm.farm.authoring import build
from datafarm.farm.prepare import prepare, survey
from datafarm.library import BUILTIN_TASKS, get_task
from datafarm.scene.spec import load_scene_spec, mesh_files


@pytest.mark.slow  # about 20-40 s per task: a 1 s recording, its survey, two renders of the scene
@pytest.mark.parametrize("task", sorted(BUILTIN_TASKS))
def test_each_task_builds_from_its_own_calibration(task, tmp_path):
    calibration = synth_calibration(tmp_path / "calibration", task=task, seconds=1.0)
    workspace = prepare(calibration, get_task(task).info.instruction, tmp_path / "ws", {"target_count": 1})
    survey(workspace)
    report = build(workspace)  # GroundingFailed names the items, the numbers and the overlay
    assert report["task"] == task and report["grounding"]["passed"], report["grounding"]["failures"]
    assert not report["inventory_check"]["not_in_inventory"], report["inventory_check"]
    scene = workspace.path("scene")
    assert all((scene / name).is_file() for name in mesh_files(load_scene_spec(scene / "scene.yaml")))
