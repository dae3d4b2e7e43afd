"""The contract reviewer role through litellm's real HTTP path against a scripted server: a verdict
that is not `accept`/`revise` is sent back; `revise` and `accept` come back with the reasons."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scripted_server import ScriptedServer  # noqa: E402

from datafarm.agent.bindings import Bindings  # noqa: E402
from datafarm.agent.contract_review import review_contract_with_llm  # noqa: E402
from datafarm.costs import CostLedger, Prices  # noqa: E402
from datafarm.library import LIBRARY_DIR  # noqa: E402

CONTRACT = {"task": "apple_on_scale", "success_criteria": ["apple_on_plate", "released", "scale_reads_apple"],
            "not_in_inventory": []}
RENDER = {"renderer": "composite", "cameras": ["head", "left_wrist", "right_wrist"]}


def submit(summary: str) -> dict:
    return {"role": "contract_reviewer", "content": None,
            "tool_calls": [{"name": "submit", "arguments": {"summary": summary}}]}


def bindings(server: ScriptedServer) -> Bindings:
    data = {"agent": "litellm", "model": "openai/scripted", "api_base": server.api_base, "backoff_s": 0.01,
            "api_key_env": "DATAFARM_TEST_KEY",
            "max_turns": 5, "prices": {"openai/scripted": {"input_per_token": 3e-6, "output_per_token": 1.5e-5}}}
    result = Bindings.model_validate(data)
    result.register_prices()
    return result


@pytest.mark.parametrize("verdict", ["revise", "accept"])
def test_the_reviewer_model_gives_a_verdict_with_reasons(tmp_path, monkeypatch, verdict):
    monkeypatch.setenv("DATAFARM_TEST_KEY", "sk-test-0123")
    reasons = "- scale_reads_apple needs a tolerance stated in the contract"
    with ScriptedServer([submit("looks fine to me"), submit(f"{verdict}\n{reasons}")]) as server:
        review = review_contract_with_llm(bindings(server), tmp_path / "reviewer", "Put the apple on the scale.",
                                          CONTRACT, RENDER, (LIBRARY_DIR / "apple_on_scale" / "scene.yaml").read_text(),
                                          CostLedger(tmp_path, Prices(cpu_second=0.0, gpu_second=0.0)))
        sent = server.completions
    assert review["verdict"] == verdict and review["reasons"] == reasons
    assert len(sent) == 2  # the first summary had no verdict line and was sent back
    assert (tmp_path / "reviewer" / "contract" / "contract.json").is_file()
    assert "Put the apple on the scale." in sent[0].body["messages"][0]["content"]
    assert "judge.py" not in str(sorted(p.name for p in (tmp_path / "reviewer").rglob("*")))
