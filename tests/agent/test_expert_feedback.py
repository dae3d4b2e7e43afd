"""Defect 2: the expert's author learns the verdict's check names and pass/fail and its own code's
errors, never the hidden judge's text (through run_expert, nor through the expert phase's report)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from datafarm.agent.expert_runner import sandboxed_expert_runner
from datafarm.agent.roles import get_role
from datafarm.agent.tools import Toolbox
from datafarm.library import get_task

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (make setup)")

SECRET = "JUDGE-SECRET-5c1e9d"
# A line of the judge the expert's author must never see, even if the expert's code somehow holds it.
JUDGE_LINE = 'limit_that_only_the_judge_knows = params["plate_margin"] * 0.5  # judge detail'
LIBRARY = Path(get_task("apple_on_scale").directory).parent

LEAKY_EXPERT = f'''
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def solve(env, skills, params):
    stolen = []
    for path in [HERE.parent / "judge" / "judge.py", *Path({str(LIBRARY)!r}).glob("*/judge.py"),
                 *HERE.parent.parent.rglob("judge.py")]:
        try:
            stolen.append(path.read_text())
        except OSError as error:
            stolen.append(f"could not read {{path.name}}: {{type(error).__name__}}")
    text = " ".join(stolen) + " " + {JUDGE_LINE!r}
    print(text, file=sys.stderr)
    if params.get("crash"):
        import os
        os._exit(3)
    raise RuntimeError("LEAK-ATTEMPT " + text)
'''


def _judge_source() -> str:
    source = (get_task("apple_on_scale").directory / "judge.py").read_text()
    return f"# {SECRET}\n{source}\n\ndef _detail(params):\n    {JUDGE_LINE}\n    return limit_that_only_the_judge_knows\n"


def _author_root(tmp_path: Path, crash: bool) -> Path:
    """The LLM author's layout: scene/, expert/ (its own), judge/ (hidden from it)."""
    apple = get_task("apple_on_scale").directory
    root = tmp_path / "ws" / ".authoring" / "agent"
    (root / "scene").mkdir(parents=True)
    for name in ("task.yaml", "scene.yaml", "params.yaml"):
        shutil.copy(apple / name, root / "scene" / name)
    if crash:
        with open(root / "scene" / "params.yaml", "a") as f:
            f.write("\ncrash: true\n")
    (root / "expert").mkdir()
    (root / "expert" / "expert.py").write_text(textwrap.dedent(LEAKY_EXPERT))
    (root / "judge").mkdir()
    (root / "judge" / "judge.py").write_text(_judge_source())
    return root


def _assert_no_judge_text(text: str) -> None:
    assert SECRET not in text
    assert "limit_that_only_the_judge_knows" not in text
    assert "def judge(trace, params)" not in text and "scale_reads_apple\": bool(" not in text
    assert "reading_tolerance" not in text  # nor the verdict's values or reason


@pytest.mark.slow
@pytest.mark.parametrize("crash", [False, True], ids=["raises", "crashes the worker"])
def test_run_expert_returns_no_judge_text(tmp_path, crash):
    root = _author_root(tmp_path, crash)
    toolbox = Toolbox(get_role("expert_author"), root, expert_runner=sandboxed_expert_runner(root))
    outcome = toolbox.call("run_expert", {"seeds": [0, 1]})
    assert outcome.ok, outcome.content
    _assert_no_judge_text(outcome.content)
    report = json.loads(outcome.content)
    assert report["successes"] == 0 and [f["seed"] for f in report["failures"]] == [0, 1]
    failure = report["failures"][0]
    # positive controls: the expert's own words and the failed check names do come back
    if crash:
        assert "exit 3" in failure["error"]
    else:
        assert "LEAK-ATTEMPT" in failure["error"] and "could not read judge.py" in failure["error"]
        assert "RuntimeError" in failure["traceback"] and "expert.py" in failure["traceback"]
        assert "scale_reads_apple" in failure["failed_checks"]
    assert set(failure) == {"seed", "error", "traceback", "failed_checks", "passed_checks"}


@pytest.mark.slow
def test_the_expert_phase_report_holds_no_judge_text(tmp_path):
    from datafarm.farm.authoring import write_expert
    from datafarm.farm.settings import FarmSettings
    from datafarm.workspace import Workspace, WorkspaceError

    source = _author_root(tmp_path / "src", crash=False)
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": FarmSettings(
        target_count=1, expert_trial_seeds=2).model_dump(mode="json")})
    shutil.copytree(source / "scene", workspace.path("scene"))
    shutil.copytree(source / "judge", workspace.path("judge"))
    workspace.path(".authoring", "package").mkdir(parents=True)
    shutil.copy(source / "expert" / "expert.py", workspace.path(".authoring", "package", "expert.py"))
    with pytest.raises(WorkspaceError, match="0%"):
        write_expert(workspace)
    text = workspace.path("expert", "report.json").read_text()
    _assert_no_judge_text(text)
    report = json.loads(text)
    assert "LEAK-ATTEMPT" in report["failures"][0]["error"]  # control: the expert's own error is there
    assert "scale_reads_apple" in report["failures"][0]["failed_checks"]
