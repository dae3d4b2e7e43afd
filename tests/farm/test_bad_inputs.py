"""The bad-input corpus (tests/farm/bad_inputs.py) through the real `datafarm` command line: each
malformed calibration, request, setting, bindings file or workspace gets one message naming the
problem and the fix, the documented exit code, no traceback, and loses nothing already done.
`benchmarks/reliability.py` runs the same corpus and prints the table."""

import pytest
from bad_input_judging import run_case
from bad_inputs import CASES, ON_FINISHED_WORKSPACE, BadCase, Ground, Invocation, run_datafarm
from kept_files import lost_files, tree_digest

@pytest.fixture(scope="module")
def ground(tmp_path_factory):
    return Ground(tmp_path_factory.mktemp("bad-inputs"))


def _param(case: BadCase):
    return pytest.param(case, id=case.name, marks=[pytest.mark.slow] if case.slow else [])


def test_the_corpus_is_large_and_covers_every_kind_of_input():
    assert len(CASES) >= 25 and len({c.name for c in CASES}) == len(CASES)
    assert {c.kind for c in CASES} == {"calibration", "request", "setting", "bindings", "workspace"}


def test_the_valid_inputs_are_accepted(ground, tmp_path):
    """The positive control: the inputs every case breaks one thing of are themselves fine."""
    result = run_datafarm(ground.prepare_args(output=tmp_path / "ws"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert (tmp_path / "ws" / "workspace.json").exists()


def test_the_judge_fails_a_command_that_accepts_its_input(ground):
    """The negative control of `run_case`: a case whose command succeeds, prints no fix and creates
    what must not exist is failed on each count."""
    def build(g: Ground, folder):
        return Invocation(g.prepare_args(output=folder / "ws"), folder, absent=(folder / "ws",))

    outcome = run_case(BadCase("accepted", "setting", build, ("no such words",), ("nor these",)), ground)
    assert not outcome.passed
    text = " ".join(outcome.failures)
    for expected in ("exit code 0", "problem is not named", "fix is not named", "was created"):
        assert expected in text, outcome.failures


def test_a_changed_deleted_or_rewritten_file_is_lost_and_a_grown_record_or_log_is_not(tmp_path):
    (tmp_path / "logs").mkdir()
    for name, text in {"a.json": "{}", "b.txt": "keep", "costs.jsonl": "1\n", "logs/datafarm.log": "x\n"}.items():
        (tmp_path / name).write_text(text)
    before = tree_digest(tmp_path)
    with open(tmp_path / "costs.jsonl", "a") as f:
        f.write("2\n")
    (tmp_path / "logs" / "datafarm.log").write_text("rotated\n")
    (tmp_path / "new.txt").write_text("new")
    assert lost_files(tmp_path, before) == []
    (tmp_path / "a.json").write_text("{ }")
    (tmp_path / "b.txt").unlink()
    (tmp_path / "costs.jsonl").write_text("9\n2\n")
    assert lost_files(tmp_path, before) == ["a.json (modified)", "b.txt (deleted)", "costs.jsonl (rewritten)"]


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_a_bad_input_is_refused_with_the_problem_and_the_fix(case, ground):
    outcome = run_case(case, ground)
    assert outcome.passed, f"{case.name}: {outcome.failures}\n--- output ---\n{outcome.output}"


@pytest.mark.slow
@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.name in ON_FINISHED_WORKSPACE])
def test_a_bad_command_on_a_finished_workspace_leaves_it_byte_identical(case, farmed_workspace, tmp_path_factory):
    outcome = run_case(case, Ground(tmp_path_factory.mktemp("finished"), workspace_source=farmed_workspace))
    assert outcome.passed, f"{case.name}: {outcome.failures}\n--- output ---\n{outcome.output}"
