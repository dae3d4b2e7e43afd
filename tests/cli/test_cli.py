import numpy as np
import pytest
import typer.main
from PIL import Image
from typer.testing import CliRunner

from datafarm.cli.main import app
from datafarm.media import read_video

runner = CliRunner()


def _command_paths(command, prefix=()):
    yield prefix
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, prefix + (name,))


@pytest.mark.parametrize("path", list(_command_paths(typer.main.get_command(app))), ids=" ".join)
def test_every_subcommand_has_help(path):
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_bad_resolution_is_explained():
    result = runner.invoke(app, ["sim", "show", "--resolution", "big"])
    assert result.exit_code != 0
    assert "WIDTHxHEIGHT" in result.output


@pytest.mark.slow
def test_sim_show_writes_a_contact_sheet_and_a_preview(tmp_path):
    result = runner.invoke(app, ["sim", "show", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    sheet = Image.open(tmp_path / "contact_sheet.png")
    assert sheet.width > 600 and sheet.height > 400
    preview = read_video(tmp_path / "preview.mp4")
    assert preview.shape[2] == 3 * 320 and preview.shape[0] > 60
    assert np.abs(preview[0].astype(int) - preview[len(preview) // 3].astype(int)).mean() > 1  # it moves


def test_match_prints_the_task_or_exits_non_zero_with_the_refusal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no bindings.json here: the built-in author
    monkeypatch.delenv("DATAFARM_AGENT", raising=False)
    monkeypatch.delenv("DATAFARM_BINDINGS", raising=False)
    found = runner.invoke(app, ["match", "--request-file", "-"], input="please weigh the apple\n")
    assert found.exit_code == 0 and "apple_on_scale" in found.output
    refused = runner.invoke(app, ["match", "--request-file", "-"], input="pour the water\n")
    assert refused.exit_code != 0 and "cannot build" in refused.output and "litellm" in refused.output


def test_prepare_refuses_a_bad_calibration_and_creates_nothing(tmp_path):
    request = tmp_path / "request.txt"
    request.write_text("Place the apple on the scale.")
    (tmp_path / "calib").mkdir()
    result = runner.invoke(app, ["prepare", "--episode", str(tmp_path / "calib"), "--request-file", str(request),
                                 "--target-count", "2", "--output", str(tmp_path / "ws")])
    assert result.exit_code != 0 and "error" in result.output
    assert not (tmp_path / "ws").exists()


def test_farm_on_a_folder_that_is_no_workspace_says_how_to_make_one(tmp_path):
    result = runner.invoke(app, ["farm", str(tmp_path)])
    assert result.exit_code != 0 and "datafarm prepare" in result.output
