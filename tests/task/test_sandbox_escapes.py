"""Sandbox escapes, the lean subset (benchmarks/sandbox_escapes.py runs every case of tests/task/escapes.py):
each attack is stopped and reported, nothing reaches the host, and the next seed is accepted."""

from __future__ import annotations

import shutil

import pytest

from escapes import CAP, CASES, run_case

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (make setup)")]


@pytest.mark.parametrize("name,stopped_by", [
    ("fork bomb (bounded at 4x the cap)", "fork refused after"),
    ("infinite loop, SIGALRM blocked", "Sandbox: timeout"),
    ("a subprocess that outlives the run", "left two processes behind"),
    ("judge: infinite loop", "the judge failed: timeout"),
])
def test_an_attack_is_stopped_reported_and_the_farm_goes_on(tmp_path, name, stopped_by):
    row = run_case(CASES[name], tmp_path / "case")
    assert stopped_by in row["stopped_by"], row
    assert not row["escaped"] and not row["leaked"] and row["host_pids_left"] == 0, row
    assert row["next_seed_accepted"], row
    if name.startswith("fork bomb"):
        children = int(row["stopped_by"].split("after ")[1].split()[0])
        assert 0 < children < CAP  # the cap stopped it, not the bound of 4 x CAP
