import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from datafarm.farm.supervise import supervise


def test_a_crashing_run_is_restarted_until_delivered(tmp_path):
    marker, delivered = tmp_path / "runs", tmp_path / "delivered"
    # Dies (as if killed) on the first two runs, delivers on the third.
    script = (f"import pathlib, os; m = pathlib.Path({str(marker)!r}); n = int(m.read_text()) + 1 if m.exists() else 1; "
              f"m.write_text(str(n)); (n >= 3 and pathlib.Path({str(delivered)!r}).write_text('ok')); os._exit(0 if n >= 3 else 137)")
    waits = []
    result = supervise([sys.executable, "-c", script], delivered=delivered.exists, max_runs=5,
                       backoff_seconds=1.0, sleep=waits.append)
    assert result.delivered and result.runs == 3
    assert waits == [1.0, 2.0]  # exponential backoff between restarts


def test_it_gives_up_after_max_runs_and_on_permanent_errors(tmp_path):
    failing = [sys.executable, "-c", "raise SystemExit(1)"]
    assert supervise(failing, delivered=lambda: False, max_runs=2, sleep=lambda s: None).runs == 2
    stopped = supervise(failing, delivered=lambda: False, max_runs=5, sleep=lambda s: None, permanent_returncodes=[1])
    assert not stopped.delivered and stopped.runs == 1


def test_permanent_exit_codes_are_the_permanent_errors():
    from datafarm.errors import TransientError
    from datafarm.farm.supervise import PERMANENT_EXIT_CODES

    assert PERMANENT_EXIT_CODES == {2, 3, 4, 5, 6} and TransientError.exit_code not in PERMANENT_EXIT_CODES


@pytest.mark.slow
def test_supervise_stops_at_a_spent_budget_instead_of_restarting(synthetic_calibration, tmp_path):
    """The real command: an LLM author whose caps cannot pay for one call (the surveyor is the first role
    to call it). The farm exits 4 (BudgetSpent) before any provider is called; supervise must not start it
    again."""
    from datafarm.farm.prepare import prepare
    from datafarm.farm.settings import FarmSettings

    root = tmp_path / "ws"
    prepare(synthetic_calibration, "Put the apple on the scale.", root, FarmSettings(target_count=1))
    (root / "bindings.json").write_text(json.dumps({
        "agent": "litellm", "model": "openai/unreachable", "api_base": "http://127.0.0.1:9/v1",
        "caps": {"survey": 1e-9, "build": 1e-9}, "prices": {"openai/unreachable": {"input_per_token": 1e-3, "output_per_token": 1e-3}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATAFARM_")}  # the workspace's bindings rule
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    result = subprocess.run([sys.executable, "-m", "cli.main", "supervise", str(root), "--max-runs", "3",
                             "--backoff", "0"], capture_output=True, text=True, env=env, timeout=600,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 4, result.stderr[-3000:]
    assert "not delivered after 1 run(s)" in result.stderr and "permanent" in result.stderr
    assert "error: " in result.stderr and "cap" in result.stderr  # the farm's own one line
    assert "BudgetExceeded" in (root / "logs" / "datafarm.log").read_text()
