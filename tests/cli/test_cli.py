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
