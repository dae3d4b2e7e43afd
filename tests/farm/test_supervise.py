import sys

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
