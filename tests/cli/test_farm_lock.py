"""`datafarm farm` on a workspace another run is farming: refused before Prefect starts, naming the run."""

from typer.testing import CliRunner

from cli.main import app
from datafarm.workspace import Workspace
from datafarm.workspace.lock import acquire, release


def test_farm_refuses_a_workspace_held_by_another_run(tmp_path):
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1}})
    workspace.path("calibration").mkdir()
    holder = acquire(workspace.root, "flow run 'busy-bee' (1234)")
    try:
        result = CliRunner().invoke(app, ["farm", str(workspace.root), "--phase", "survey"])
    finally:
        release(workspace.root, holder)
    assert result.exit_code == 2, result.output
    assert "flow run 'busy-bee' (1234)" in " ".join(result.output.split())
