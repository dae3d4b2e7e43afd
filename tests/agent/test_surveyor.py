"""The surveyor role through litellm's real HTTP path against a scripted server: it is shown the keyframe
(read_file on a PNG sends the image), a bad inventory is sent back, a good one comes back labelled."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from scripted_server import ScriptedServer  # noqa: E402

from datafarm.agent.bindings import Bindings  # noqa: E402
from datafarm.agent.surveyor import survey_with_llm  # noqa: E402


def call(name: str, **arguments) -> dict:
    return {"role": "surveyor", "content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


def test_the_surveyor_sees_the_keyframe_and_writes_the_inventory(tmp_path, monkeypatch):
    monkeypatch.setenv("DATAFARM_TEST_KEY", "sk-test-0123")
    keyframes = tmp_path / "keyframes"
    keyframes.mkdir()
    Image.fromarray(np.full((24, 32, 3), 128, np.uint8)).save(keyframes / "head_0.png")
    good = [{"label": "red apple", "xy": [-0.15, -0.19], "size_m": {"width": 0.055, "height": 0.055}, "colour": "red"}]
    script = [call("read_file", path="keyframes/head_0.png"),
              call("write_file", path="survey/inventory.json", content=json.dumps({"apple": 1})),
              call("submit", summary="one apple"),  # refused: not a list
              call("write_file", path="survey/inventory.json", content=json.dumps(good)),
              call("submit", summary="one red apple left of centre")]
    with ScriptedServer(script) as server:
        bindings = Bindings.model_validate({
            "agent": "litellm", "model": "openai/scripted", "api_base": server.api_base, "backoff_s": 0.01,
            "api_key_env": "DATAFARM_TEST_KEY", "max_turns": 8,
            "prices": {"openai/scripted": {"input_per_token": 3e-6, "output_per_token": 1.5e-5}}})
        bindings.register_prices()
        result = survey_with_llm(bindings, tmp_path / "surveyor", keyframes, "Put the apple on the scale.",
                                 {"objects": []})
        sent = server.completions
    assert [o["label"] for o in result["objects"]] == ["red apple"]
    assert result["objects"][0]["source"] == "surveyor (openai/scripted)"
    images = [part for m in sent[1].body["messages"] if isinstance(m.get("content"), list)
              for part in m["content"] if part.get("type") == "image_url"]
    assert images and images[0]["image_url"]["url"].startswith("data:image/png;base64,")
    refused = [m for m in sent[3].body["messages"] if m.get("role") == "tool" and m.get("name") == "submit"]
    assert refused and "JSON list" in refused[0]["content"]
