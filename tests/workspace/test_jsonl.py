"""Append-only logs survive a kill mid-write: a torn last line is ignored, then cut before the next append."""

import pytest

from datafarm.agent.runtime import Transcript
from datafarm.costs import CostLedger, Prices
from datafarm.errors import BadInput
from datafarm.farm.episodes import ATTEMPTS, Attempt, _log_attempt, attempts
from datafarm.workspace import Workspace
from datafarm.workspace.jsonl import append_jsonl, read_jsonl


@pytest.fixture
def workspace(tmp_path):
    return Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1}})


def tear(path) -> None:
    """What a kill in the middle of an append leaves: the start of a line, no newline."""
    with open(path, "ab") as f:
        f.write(b'{"seed": 7, "acc')


def test_read_ignores_a_torn_last_line_and_append_cuts_it(tmp_path):
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"n": 1})
    tear(path)
    assert read_jsonl(path) == [{"n": 1}]
    append_jsonl(path, {"n": 2})
    assert read_jsonl(path) == [{"n": 1}, {"n": 2}]
    assert path.read_text() == '{"n": 1}\n{"n": 2}\n'


def test_a_torn_first_line_is_cut_whole(tmp_path):
    path = tmp_path / "log.jsonl"
    tear(path)
    assert read_jsonl(path) == []
    append_jsonl(path, {"n": 1})
    assert path.read_text() == '{"n": 1}\n'


def test_a_damaged_line_before_the_last_names_the_file_line_and_fix(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"n": 1}\nnot json\n{"n": 3}\n')
    with pytest.raises(BadInput, match=r"log.jsonl, line 2: .*delete that line"):
        read_jsonl(path)
    path.write_text('{"n": 1}\n[1, 2]\n')
    with pytest.raises(BadInput, match="line 2: expected a JSON object"):
        read_jsonl(path)


def test_attempts_survive_a_torn_line(workspace):
    _log_attempt(workspace, Attempt(0, True, "ok", 0))
    tear(workspace.path(ATTEMPTS))
    assert attempts(workspace) == [Attempt(0, True, "ok", 0)]
    _log_attempt(workspace, Attempt(1, False, "dropped"))
    assert [a.seed for a in attempts(workspace)] == [0, 1]


def test_cost_ledger_survives_a_torn_line(workspace):
    ledger = CostLedger(workspace.root, Prices(cpu_second=0.5, gpu_second=1.0))
    ledger.add_cpu("rollout", 2.0, episode=0)
    tear(ledger.path)
    assert ledger.total() == 1.0
    ledger.add_cpu("render", 4.0, episode=0)
    assert ledger.total() == 3.0


def test_timings_survive_a_torn_line(workspace):
    workspace.log_timing("rollout", 1.5, episode=0)
    tear(workspace.path("timings.jsonl"))
    [kept] = workspace.timings()
    assert (kept["phase"], kept["episode"], kept["seconds"]) == ("rollout", 0, 1.5) and kept["end"] > 0
    workspace.log_timing("render", 2.0, episode=0)
    assert len(workspace.timings()) == 2


def test_transcript_survives_a_torn_line(tmp_path):
    transcript = Transcript(tmp_path / "transcripts" / "expert_author.jsonl")
    transcript.append("start", role="expert_author")
    tear(transcript.path)
    assert [e["event"] for e in transcript.events()] == ["start"]
    transcript.append("turn", number=1)
    assert [e["event"] for e in transcript.events()] == ["start", "turn"]
