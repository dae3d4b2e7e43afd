import numpy as np
import pytest
import typer
import typer.main
from PIL import Image
from typer.testing import CliRunner

from cli.main import app
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


def test_a_library_error_is_one_line_with_its_exit_code_and_the_traceback_goes_to_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = runner.invoke(app, ["verify", str(tmp_path / "nowhere")])
    assert result.exit_code == 2  # BadInput
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert result.output.startswith("error: ") and "datafarm prepare" in result.output
    assert "Traceback" in (tmp_path / "cache" / "datafarm" / "datafarm.log").read_text()


def test_an_unknown_phase_lists_the_known_ones(tmp_path):
    from datafarm.farm.registry import FARMED

    result = runner.invoke(app, ["farm", str(tmp_path), "--phase", "rendr"])
    assert result.exit_code == 2 and all(phase in result.output for phase in FARMED)
    assert "rollout, render, review" in runner.invoke(app, ["farm", "--help"]).output.replace("\n", " ").replace("  ", " ")


def _app_raising(error: BaseException) -> typer.Typer:
    from cli.errors import guard_all

    demo = typer.Typer()

    @demo.command()
    def fail(workspace: str = typer.Argument(...)) -> None:
        raise error

    @demo.command()
    def other() -> None:
        pass

    guard_all(demo)
    return demo


def test_an_internal_error_says_so_in_one_line_exits_70_and_logs_the_traceback_in_the_workspace(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "workspace.json").write_text("{}")
    result = runner.invoke(_app_raising(ZeroDivisionError("division by zero")), ["fail", str(workspace)])
    assert result.exit_code == 70
    assert len(result.output.strip().splitlines()) == 1
    assert "internal error" in result.output and "logs/datafarm.log" in result.output.replace("\n", "")
    assert "ZeroDivisionError" in (workspace / "logs" / "datafarm.log").read_text()


def test_a_library_error_wrapped_by_another_is_found(tmp_path, monkeypatch):
    from datafarm.errors import BudgetSpent

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    try:
        try:
            raise BudgetSpent("the build phase's LLM spend would pass its cap: raise caps.build")
        except BudgetSpent as inner:
            raise RuntimeError("Flow run encountered an exception") from inner
    except RuntimeError as outer:
        wrapped = outer
    result = runner.invoke(_app_raising(wrapped), ["fail", "x"])
    assert result.exit_code == 4 and result.output.startswith("error: the build phase's LLM spend")


def test_a_prefect_server_that_stops_answering_is_a_transient_error_not_a_bug(synthetic_calibration, tmp_path):
    """The farm against a Prefect API nobody answers (a server stopped or killed under it): one line naming the
    API and the fix, exit 75 (rerun or supervise), nothing about a bug."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    prepared = runner.invoke(app, ["prepare", "--episode", str(synthetic_calibration), "--instruction",
                                   "Place the apple on the scale.", "--target-count", "1", "--output", str(tmp_path / "ws")])
    assert prepared.exit_code == 0, prepared.output
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = os.environ | {"PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "cli.main", "farm", str(tmp_path / "ws")], env=env, cwd=root,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 75, result.stderr
    assert f"lost the Prefect API at http://127.0.0.1:{port}/api" in result.stderr and "bug" not in result.stderr


def test_prepare_sets_randomization_families_and_refuses_a_bad_one(synthetic_calibration, tmp_path):
    import json

    base = ["prepare", "--episode", str(synthetic_calibration), "--instruction", "Place the apple on the scale.",
            "--target-count", "2"]
    result = runner.invoke(app, [*base, "--output", str(tmp_path / "ws"), "--randomization", "geometry=false",
                                 "--randomization", "recovery_fraction=0.3", "--randomization", "push_distance=0.05,0.1"])
    assert result.exit_code == 0, result.output
    randomization = json.loads((tmp_path / "ws" / "workspace.json").read_text())["settings"]["randomization"]
    assert randomization["geometry"] is False and randomization["recovery_fraction"] == 0.3
    assert randomization["push_distance"] == [0.05, 0.1] and randomization["execution"] is True
    refused = runner.invoke(app, [*base, "--output", str(tmp_path / "bad"), "--randomization", "recovery_fraction=2"])
    assert refused.exit_code == 2 and "recovery_fraction" in refused.output and "--randomization" in refused.output
    assert not (tmp_path / "bad").exists()
