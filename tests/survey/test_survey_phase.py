"""The survey and build phases on a workspace: footage that does not show the requested objects stops the
build with the grounding overlay and numbers (the positive path runs in every farm test)."""

from __future__ import annotations

import pytest

from datafarm.calibration import robomind_calibration_folder
from datafarm.farm.authoring import GroundingFailed, build
from datafarm.farm.prepare import prepare, survey
from datafarm.farm.show import show_survey


@pytest.mark.slow  # a real clip surveyed, the scene rendered: about a minute
def test_footage_without_the_requested_objects_stops_the_build(tmp_path):
    try:
        folder = robomind_calibration_folder(tmp_path / "real", seconds=1.0)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    workspace = prepare(folder, "Put the apple on the scale.", tmp_path / "ws", {"target_count": 1})
    data = survey(workspace)
    assert data["cameras"]["head"]["fit"]["alignment_px_before"] > 0 and data["warnings"]
    assert workspace.path("keyframes", "survey_overlay.png").is_file()
    assert workspace.path("keyframes", "table_sample.png").is_file()
    assert show_survey(workspace).is_file()  # what `datafarm show WS --survey` writes
    with pytest.raises(GroundingFailed, match="does not match the calibration footage") as stopped:
        build(workspace)
    assert "apple" in str(stopped.value) and "grounding.png" in str(stopped.value)
    report = workspace.read_json("scene/grounding.json")
    assert not report["grounding"]["passed"] and "apple" in report["inventory_check"]["not_in_inventory"]
    assert workspace.path("scene", "grounding.png").is_file()
