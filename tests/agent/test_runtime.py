"""The agent runtime against a scripted OpenAI-compatible server, through litellm's real HTTP path."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scripted_server import ScriptedServer, load_script  # noqa: E402

from datafarm.agent.bindings import Bindings, BindingsError, load_bindings  # noqa: E402
from datafarm.agent.roles import ROLES, compile_context, get_role  # noqa: E402
from datafarm.agent.runtime import (AgentError, BudgetExceeded, LLMAuthor, Session, Transcript,  # noqa: E402
                                    open_session)
from datafarm.agent.tools import Toolbox, in_process_expert_runner  # noqa: E402
from datafarm.costs import CostLedger, Prices  # noqa: E402
from datafarm.library import LIBRARY_DIR  # noqa: E402
from datafarm.task.package import load_task_package  # noqa: E402

APPLE = LIBRARY_DIR / "apple_on_scale"
REQUEST = "Put the apple on the kitchen scale."
SECRET = "sk-test-SECRET-0123456789abcdef"
log = logging.getLogger(__name__)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with the scene and the (hidden) judge of apple_on_scale, and no expert yet."""
    (tmp_path / "scene").mkdir()
    for name in ("task.yaml", "scene.yaml", "params.yaml"):
        shutil.copy(APPLE / name, tmp_path / "scene" / name)
    (tmp_path / "judge").mkdir()
    shutil.copy(APPLE / "judge.py", tmp_path / "judge" / "judge.py")
    return tmp_path


@pytest.fixture
def ledger(tmp_path: Path) -> CostLedger:
    return CostLedger(tmp_path, Prices(cpu_second=0.0, gpu_second=0.0))


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("DATAFARM_BINDINGS", "DATAFARM_AGENT", "DATAFARM_MODEL", "DATAFARM_API_BASE", "DATAFARM_CAP_EXPERT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATAFARM_TEST_KEY", SECRET)
    return SECRET


def bindings_for(server: ScriptedServer, **overrides) -> Bindings:
    data = {"agent": "litellm", "model": "openai/scripted", "api_base": server.api_base,
            "api_key_env": "DATAFARM_TEST_KEY", "backoff_s": 0.01, "max_turns": 20,
            "prices": {"openai/scripted": {"input_per_token": 3e-6, "output_per_token": 1.5e-5}}, **overrides}
    bindings = Bindings.model_validate(data)
    bindings.register_prices()
    return bindings


def fake_runner(root: Path, calls: list[list[int]]):
    """Stands in for simulation: the reference expert succeeds, the typo'd one fails with a real trace."""

    def run(seeds: list[int]) -> dict:
        calls.append(seeds)
        code = (root / "expert" / "expert.py").read_text()
        if code == (APPLE / "expert.py").read_text():
            return {"seeds": seeds, "successes": len(seeds), "success_rate": 1.0, "failures": []}
        trace = ('Traceback (most recent call last):\n  File "expert/expert.py", line 17, in solve\n'
                 '    skills.lift(side, params["lift_hieght"])\nKeyError: \'lift_hieght\'\n')
        failures = [{"seed": s, "error": "KeyError: 'lift_hieght'", "traceback": trace,
                     "verdict": "failed: apple_on_plate, scale_reads_apple, released",
                     "failed_checks": ["apple_on_plate", "scale_reads_apple", "released"]} for s in seeds]
        return {"seeds": seeds, "successes": 0, "success_rate": 0.0, "failures": failures}

    return run


def expert_session(root: Path, bindings: Bindings, ledger: CostLedger | None, runner=None, **options) -> Session:
    from datafarm.agent.tools import skill_api_text

    return open_session("expert_author", bindings, root, REQUEST, {"cameras": ["head", "left_wrist"]},
                        skill_api_text(), ledger, expert_runner=runner, **options)


def tool_results(session: Session) -> dict[str, list[str]]:
    results: dict[str, list[str]] = {}
    for message in session.messages:
        if message["role"] == "tool":
            results.setdefault(message["name"], []).append(message["content"])
    return results


# ----- (1) a valid expert is written and submitted ---------------------------------------------------------
def test_session_writes_the_expert_and_submits(root: Path, ledger: CostLedger) -> None:
    calls: list[list[int]] = []
    with ScriptedServer(load_script("expert_ok")) as server:
        session = expert_session(root, bindings_for(server), ledger, fake_runner(root, calls))
        result = session.run()
    assert result.status == "submitted" and "10/10" in result.summary
    assert (root / "expert" / "expert.py").read_text() == (APPLE / "expert.py").read_text()
    assert calls == [list(range(10))] and result.turns == 6 == len(server.completions)
    first = server.completions[0].body
    assert first["messages"][0] == {"role": "system", "content": session.context}
    assert [t["function"]["name"] for t in first["tools"]] == list(get_role("expert_author").tools)
    assert "def grasp(" not in tool_results(session)["list_skill_api"][0]  # signatures, not source
    assert "grasp(side: 'str', name: 'str'" in tool_results(session)["list_skill_api"][0]
    entries = ledger.entries()
    assert len(entries) == 6 and {e.item for e in entries} == {"llm:openai/scripted"}
    assert {e.phase for e in entries} == {"expert"} and entries[0].unit == "tokens:expert_author"
    assert sum(e.quantity for e in entries) == result.tokens
    assert sum(e.usd for e in entries) == pytest.approx(result.usd)
    assert result.usd == pytest.approx(result.prompt_tokens * 3e-6 + result.completion_tokens * 1.5e-5)
    events = [e["event"] for e in Transcript(Path(result.transcript)).events()]
    assert events[0] == "session" and events[-1] == "end" and events.count("response") == 6


# ----- (2) a failing expert is fixed from its failure trace; the judge stays hidden ----------------------------
def test_failed_expert_is_read_and_fixed(root: Path, ledger: CostLedger) -> None:
    calls: list[list[int]] = []
    with ScriptedServer(load_script("expert_fix")) as server:
        session = expert_session(root, bindings_for(server), ledger, fake_runner(root, calls))
        result = session.run()
    assert result.status == "submitted" and len(calls) == 2
    runs = [json.loads(r) for r in tool_results(session)["run_expert"]]
    assert runs[0]["success_rate"] == 0.0 and "KeyError: 'lift_hieght'" in runs[0]["failures"][0]["traceback"]
    assert runs[1]["success_rate"] == 1.0
    judge_read = tool_results(session)["read_file"][1]
    assert judge_read.startswith("error:") and "may read only under expert/, scene/, contract/" in judge_read
    assert "reading_tolerance" not in judge_read.split("refused")[1]  # nothing of the judge leaked
    # the model received the refusal and the failure trace as tool results, in its next request
    later = json.dumps(server.completions[4].body["messages"])
    assert "refused" in later and "lift_hieght" in later


@pytest.mark.slow
def test_in_process_runner_reports_a_real_failure_trace(root: Path, ledger: CostLedger) -> None:
    """The typo'd expert on the real simulator, one seed: the traceback names the line."""
    (root / "expert").mkdir()
    (root / "expert" / "expert.py").write_text((APPLE / "expert.py").read_text().replace("lift_height", "lift_hieght"))
    report = in_process_expert_runner(root)([0])
    assert report["success_rate"] == 0.0
    failure = report["failures"][0]
    assert failure["error"] == "KeyError: 'lift_hieght'" and 'params["lift_hieght"]' in failure["traceback"]
    assert "apple_on_plate" in failure["failed_checks"]


# ----- (3) the budget cap stops the session before the call that would pass it ---------------------------------
def test_budget_cap_stops_with_what_was_spent_and_how_to_raise_it(root: Path, ledger: CostLedger) -> None:
    prices = {"openai/scripted": {"input_per_token": 1e-5, "output_per_token": 3e-5}}  # 0.036 USD a call
    with ScriptedServer(load_script("budget")) as server:
        session = expert_session(root, bindings_for(server, caps={"expert": 0.05}, prices=prices), ledger)
        with pytest.raises(BudgetExceeded) as caught:
            session.run()
        assert len(server.completions) == 1  # the second call was never made
        message = str(caught.value)
        assert "$0.0360" in message and "$0.0500" in message and "'expert'" in message
        assert "caps.expert" in message and "DATAFARM_CAP_EXPERT" in message
        assert ledger.by_phase()["expert"]["total"] == pytest.approx(0.036)
        # raising the cap resumes the session from its transcript
        resumed = expert_session(root, bindings_for(server, caps={"expert": 1.0}, prices=prices), ledger)
        assert resumed.run().status == "submitted" and len(server.completions) == 4


# ----- (4) 429 / 503 are retried with backoff, a bounded number of times ----------------------------------------
def test_rate_limit_then_success(root: Path, ledger: CostLedger) -> None:
    delays: list[float] = []
    with ScriptedServer(load_script("expert_ok"), fail_first=[429, 503]) as server:
        session = expert_session(root, bindings_for(server), ledger, fake_runner(root, []), sleep=delays.append)
        result = session.run()
    assert result.status == "submitted" and [r.status for r in server.received[:3]] == [429, 503, 200]
    assert delays == [0.01, 0.02]
    retries = [e for e in Transcript(Path(result.transcript)).events() if e["event"] == "retry"]
    assert "RateLimitError" in retries[0]["error"] and "ServiceUnavailableError" in retries[1]["error"]
    assert len(ledger.entries()) == 6  # failed attempts cost nothing


def test_retries_are_bounded(root: Path) -> None:
    with ScriptedServer(load_script("expert_ok"), fail_first=[429] * 5) as server:
        session = expert_session(root, bindings_for(server, max_retries=2), None, sleep=lambda s: None)
        with pytest.raises(AgentError, match="failed 3 times; last: RateLimitError"):
            session.run()
        assert len(server.received) == 3


# ----- (5) a killed session resumes from its transcript without redoing finished turns ---------------------------
def test_stopped_session_resumes_from_its_transcript(root: Path, ledger: CostLedger) -> None:
    with ScriptedServer(load_script("expert_ok")) as server:
        bindings = bindings_for(server)
        first = expert_session(root, bindings, ledger, fake_runner(root, []))
        assert first.run(stop_after_turns=2).status == "paused" and len(server.completions) == 2
        again = expert_session(root, bindings, ledger, fake_runner(root, []))  # a new process, same transcript
        result = again.run()
    assert result.status == "submitted" and len(server.completions) == 6 and result.turns == 6
    # the third request replays the first two turns: system, user, 2 x (assistant + its tool results)
    replayed = server.completions[2].body["messages"]
    assert [m["role"] for m in replayed] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
    assert len(ledger.entries()) == 6 and result.tokens == sum(e.quantity for e in ledger.entries())
    assert again.run().status == "submitted" and len(server.completions) == 6  # finished: nothing is asked


def test_kill_during_a_tool_call_answers_it_on_resume(root: Path) -> None:
    calls: list[list[int]] = []

    def dies_once(seeds: list[int]) -> dict:
        if not calls:
            calls.append(seeds)
            raise KeyboardInterrupt  # the process is killed while the expert runs
        return fake_runner(root, calls)(seeds)

    with ScriptedServer(load_script("expert_ok")) as server:
        with pytest.raises(KeyboardInterrupt):
            expert_session(root, bindings_for(server), None, dies_once).run()
        assert len(server.completions) == 5
        result = expert_session(root, bindings_for(server), None, dies_once).run()
    assert result.status == "submitted" and len(server.completions) == 6 and len(calls) == 2


def test_changed_context_refuses_to_resume(root: Path, tmp_path: Path) -> None:
    with ScriptedServer(load_script("expert_ok")) as server:
        bindings = bindings_for(server)
        text, digest = compile_context("expert_author", REQUEST)
        transcript = tmp_path / "t.jsonl"
        Session("expert_author", bindings, root, text, digest, transcript).run(stop_after_turns=1)
        other, other_digest = compile_context("expert_author", "Weigh the apple.")
        with pytest.raises(AgentError, match="another context"):
            Session("expert_author", bindings, root, other, other_digest, transcript).run()


# ----- the API key comes from the environment and is never written down -----------------------------------------
def test_api_key_never_reaches_the_transcript(root: Path, ledger: CostLedger, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with ScriptedServer(load_script("expert_ok"), fail_first=[429]) as server:
        bindings = bindings_for(server)
        result = expert_session(root, bindings, ledger, fake_runner(root, []), sleep=lambda s: None).run()
    assert {r.authorization for r in server.received} == {f"Bearer {SECRET}"}  # it was used
    assert SECRET not in Path(result.transcript).read_text()
    assert SECRET not in ledger.path.read_text() and SECRET not in caplog.text
    assert SECRET not in bindings.model_dump_json()


# ----- information hiding: each role's file tools stay in its folders -----------------------------------------------
def test_file_tools_are_confined_to_the_role_folders(root: Path) -> None:
    (root / "expert").mkdir()
    (root / "expert" / "peek.py").symlink_to(root / "judge" / "judge.py")
    expert = Toolbox(get_role("expert_author"), root)
    for path in ("judge/judge.py", "expert/../judge/judge.py", str(root / "judge" / "judge.py"), "expert/peek.py",
                 "transcripts/judge_author.jsonl"):
        outcome = expert.call("read_file", {"path": path})
        assert not outcome.ok and outcome.content.startswith("error:") and "refused" in outcome.content, path
    assert "judge" not in expert.call("list_files", {}).content
    assert not expert.call("list_files", {"folder": "judge"}).ok
    assert not expert.call("write_file", {"path": "scene/params.yaml", "content": "x"}).ok  # scene/ is read-only
    assert expert.call("read_file", {"path": "scene/params.yaml"}).ok

    (root / "expert" / "peek.py").unlink()
    (root / "expert" / "expert.py").write_text("def solve(env, skills, params): ...\n")
    judge = Toolbox(get_role("judge_author"), root)
    assert not judge.call("read_file", {"path": "expert/expert.py"}).ok
    assert not judge.call("run_expert", {"seeds": [0]}).ok  # not one of its tools
    assert judge.call("write_file", {"path": "judge/judge.py", "content": "x = 1\n"}).ok
    reviewer = Toolbox(get_role("contract_reviewer"), root)
    assert not reviewer.call("read_file", {"path": "scene/scene.yaml"}).ok
    assert expert.call("read_file", {"path": "expert/expert.py"}).ok
    assert expert.call("nope", "{").content.startswith("error:")  # never an exception


def test_roles_registry_and_context() -> None:
    assert set(ROLES) == {"surveyor", "scene_builder", "contract_author", "contract_reviewer", "expert_author",
                          "judge_author", "episode_reviewer"}
    with pytest.raises(KeyError, match="known roles: surveyor, scene_builder"):
        get_role("teleoperator")
    for role in ROLES.values():
        assert role.instruction_text().strip() and "submit" in role.tools
        assert not {"judge", "expert"} <= set(role.readable)  # no role sees both the expert and the judge
    text, digest = compile_context("expert_author", REQUEST, {"b": 1, "a": 2}, "API")
    assert (text, digest) == compile_context("expert_author", REQUEST, {"a": 2, "b": 1}, "API")
    assert digest != compile_context("expert_author", REQUEST + "!", {"a": 2, "b": 1}, "API")[1]
    assert REQUEST in text and "# API reference" in text and "expert/" in text


# ----- bindings ------------------------------------------------------------------------------------------------------
def test_bindings_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_bindings().agent == "builtin"
    (tmp_path / "bindings.json").write_text(json.dumps({
        "agent": "litellm", "model": "openai/local", "api_key_env": "DATAFARM_TEST_KEY",
        "roles": {"expert_author": "openai/big"}, "caps": {"expert": 2.0},
        "prices": {"openai/local": {"input_per_token": 1e-7, "output_per_token": 2e-7}}}))
    bindings = load_bindings()
    assert bindings.model_for("judge_author") == "openai/local" and bindings.model_for("expert_author") == "openai/big"
    assert bindings.cap_for("expert") == 2.0 and bindings.api_key() == SECRET
    monkeypatch.setenv("DATAFARM_MODEL", "openai/other")
    monkeypatch.setenv("DATAFARM_CAP_EXPERT", "0.5")
    bindings = load_bindings()
    assert bindings.model_for("judge_author") == "openai/other" and bindings.cap_for("expert") == 0.5
    assert "caps.expert" in bindings.cap_hint("expert")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"agent": "litellm", "model": "m", "roles": {"teleoperator": "x"}}))
    monkeypatch.setenv("DATAFARM_BINDINGS", str(elsewhere))
    with pytest.raises(BindingsError, match="unknown roles"):
        load_bindings()
    elsewhere.write_text(json.dumps({"agent": "litellm"}))
    monkeypatch.delenv("DATAFARM_MODEL")
    with pytest.raises(BindingsError, match="needs a default `model`"):
        load_bindings()
    monkeypatch.delenv("DATAFARM_TEST_KEY")
    with pytest.raises(BindingsError, match=r"\$DATAFARM_TEST_KEY"):
        Bindings(agent="litellm", model="m", api_key_env="DATAFARM_TEST_KEY").api_key()


# ----- a whole task adaptation through LLMAuthor ---------------------------------------------------------------------
def test_llm_author_adapts_a_task(tmp_path: Path, ledger: CostLedger) -> None:
    workdir, calls = tmp_path / "authoring", []
    with ScriptedServer(load_script("full_adaptation")) as server:
        author = LLMAuthor(bindings_for(server), workdir, ledger, survey={"cameras": ["head"]},
                           expert_runner=fake_runner(workdir, calls))
        match = author.match(REQUEST)
        assert (match.task, match.score) == ("apple_on_scale", 1.0)
        package = load_task_package(author.write_package(match, tmp_path / "package"))
    assert package.name == "apple_on_scale" and len(calls) == 2
    for name in ("expert.py", "judge.py", "scene.yaml"):
        assert (package.directory / name).read_text() == (APPLE / name).read_text()
    assert server.played == len(server.responses)
    figures = {role: (r.turns, r.prompt_tokens, r.completion_tokens, round(r.usd, 4))
               for role, r in author.results.items()}
    log.warning("tokens per role (turns, prompt, completion, usd): %s", figures)
    assert set(figures) == {"contract_author", "scene_builder", "judge_author", "expert_author"}
    assert {e.phase for e in ledger.entries()} == {"build", "judge", "expert"}


def test_lost_connection_is_retried_then_reported(root: Path) -> None:
    server = ScriptedServer([]).start()
    bindings = bindings_for(server, max_retries=1)
    server.stop()  # nothing listens on the port any more
    delays: list[float] = []
    with pytest.raises(AgentError, match=r"failed 2 times; last: \w+Error: .*Connection error"):
        expert_session(root, bindings, None, sleep=delays.append).run()
    assert delays == [0.01]


# ----- the scene builder sees its scene from the calibrated cameras --------------------------------------------
def test_preview_scene_renders_the_scene_for_vision_models(tmp_path: Path) -> None:
    import io

    from PIL import Image

    from datafarm.agent.tools import Toolbox

    toolbox = Toolbox(get_role("scene_builder"), tmp_path)
    refused = toolbox.call("preview_scene", {})
    assert not refused.ok and "scene/scene.yaml first" in refused.content
    (tmp_path / "scene" / "scene.yaml").write_text((APPLE / "scene.yaml").read_text())
    outcome = toolbox.call("preview_scene", {})
    assert outcome.ok and len(outcome.images) == 1, outcome.content
    image = Image.open(io.BytesIO(outcome.images[0]))
    assert image.width == 3 * 320 and image.height == 240
    assert "head: 0 scene pixels" not in outcome.content  # the head camera sees the apple and the scale
    assert "preview_scene" not in [t["function"]["name"] for t in Toolbox(get_role("expert_author"), tmp_path).schemas()]
