"""The episode reviewer role through litellm's real HTTP path against a scripted server: it is shown the
episode's contact sheet, a bad decision is sent back, and in the farm its rejection overrules the
classical checks (which decide alone without a key: every other farm test)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from scripted_server import ScriptedServer  # noqa: E402

from datafarm.agent.bindings import Bindings  # noqa: E402
from datafarm.agent.episode_reviewer import review_episode_with_llm  # noqa: E402

KEY_ENV = "DATAFARM_TEST_KEY"
REASON = "the rendered head view shows the apple on the table after the place"


def call(name: str, **arguments) -> dict:
    return {"role": "episode_reviewer", "content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


def script(decision: str) -> list[dict]:
    return [call("read_file", path="episodes/sheet.png"),
            call("write_file", path="review/episodes/decision.json", content=json.dumps({"decision": "maybe"})),
            call("submit", summary="unsure"),  # refused: not keep or reject
            call("write_file", path="review/episodes/decision.json",
                 content=json.dumps({"decision": decision, "reason": REASON})),
            call("submit", summary=REASON)]


def bindings_for(server) -> dict:
    return {"agent": "litellm", "model": "openai/scripted", "api_base": server.api_base, "backoff_s": 0.01,
            "api_key_env": KEY_ENV, "max_turns": 8,
            "prices": {"openai/scripted": {"input_per_token": 3e-6, "output_per_token": 1.5e-5}}}


def test_the_reviewer_sees_the_sheet_and_a_bad_decision_is_sent_back(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-0123")
    sheet = tmp_path / "sheet.png"
    Image.fromarray(np.full((24, 32, 3), 90, np.uint8)).save(sheet)
    with ScriptedServer(script("reject")) as server:
        bindings = Bindings.model_validate(bindings_for(server))
        bindings.register_prices()
        result = review_episode_with_llm(bindings, tmp_path / "reviewer", "Put the apple on the scale.", sheet,
                                         {"admitted": True, "checks": []})
        sent = server.completions
    assert (result["decision"], result["reason"], result["model"]) == ("reject", REASON, "openai/scripted")
    images = [part for m in sent[1].body["messages"] if isinstance(m.get("content"), list)
              for part in m["content"] if part.get("type") == "image_url"]
    assert images and images[0]["image_url"]["url"].startswith("data:image/png;base64,")
    refused = [m for m in sent[3].body["messages"] if m.get("role") == "tool" and m.get("name") == "submit"]
    assert refused and '"keep" or "reject"' in refused[0]["content"]


@pytest.mark.slow
@pytest.mark.parametrize("decision", ["keep", "reject"])
def test_in_the_farm_the_reviewers_rejection_overrules_the_checks(farmed_workspace, tmp_path, monkeypatch, decision):
    from datafarm.costs import CostLedger
    from datafarm.farm.episodes import review_episode

    from datafarm.workspace import Workspace

    monkeypatch.setenv(KEY_ENV, "sk-test-0123")
    root = tmp_path / "ws"
    shutil.copytree(farmed_workspace, root)
    workspace = Workspace.open(root)
    assert workspace.read_json("episodes/000000/review.json")["admitted"]  # the checks admitted it
    with ScriptedServer(script(decision)) as server:
        (root / "bindings.json").write_text(json.dumps(bindings_for(server)))
        review = review_episode(workspace, 0)
    assert review["admitted"] is (decision == "keep")
    assert review["llm"]["decision"] == decision and review["reviewer"] == "builtin + openai/scripted"
    assert (f"episode reviewer: {REASON}" in review["reasons"]) is (decision == "reject")
    assert workspace.read_json("episodes/000000/review.json")["admitted"] is review["admitted"]
    charged = [e for e in CostLedger(root).entries() if e.phase == "review" and e.item == "llm:openai/scripted"]
    assert charged and all(e.usd > 0 for e in charged)
