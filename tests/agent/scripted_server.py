"""A scripted OpenAI-compatible chat server on 127.0.0.1 for agent tests (no network, no model).

It answers POST /v1/chat/completions (and /chat/completions) by playing recorded assistant responses
in order, tool calls included. A transcript file (tests/agent/transcripts/*.json) looks like

    {"description": "...",
     "responses": [
        {"role": "expert_author",                       # a label for the token figures, not sent
         "content": null,
         "tool_calls": [{"name": "read_file", "arguments": {"path": "scene/scene.yaml"}}],
         "usage": {"prompt_tokens": 5200, "completion_tokens": 40}},   # optional
        ...]}

Without a `usage`, the server counts tokens the way a provider would bill them, approximately:
the request's messages and tool schemas at 4 characters a token, and the same for the answer.
`fail_first=[429, 503]` answers those statuses to the first requests before playing the script.
The server is bounded: it stops by itself after `lifetime_s`, and answers 410 once the script is
exhausted, so a runaway loop fails fast instead of hanging a test.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TRANSCRIPTS = Path(__file__).parent / "transcripts"
CHARS_PER_TOKEN = 4


def load_script(name: str) -> list[dict[str, Any]]:
    """The recorded responses of tests/agent/transcripts/<name>.json."""
    return json.loads((TRANSCRIPTS / f"{name}.json").read_text())["responses"]


def estimate_tokens(payload: Any) -> int:
    return max(1, len(json.dumps(payload)) // CHARS_PER_TOKEN)


@dataclass
class Received:
    """One request as the server saw it (the body, and whether it carried a bearer token)."""

    path: str
    body: dict[str, Any]
    authorization: str | None
    status: int = 200


@dataclass
class ScriptedServer:
    responses: list[dict[str, Any]]
    fail_first: list[int] = field(default_factory=list)
    lifetime_s: float = 60.0
    received: list[Received] = field(default_factory=list)
    played: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._failures = list(self.fail_first)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-llm", daemon=True)
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True

    # ----- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedServer:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def completions(self) -> list[Received]:
        """The requests that got a scripted answer (not the injected failures)."""
        return [r for r in self.received if r.status == 200]

    # ----- answering -------------------------------------------------------------------------------
    def answer(self, path: str, body: dict[str, Any], authorization: str | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            record = Received(path, body, authorization)
            self.received.append(record)
            if self._failures:
                record.status = self._failures.pop(0)
                return record.status, {"error": {"message": f"scripted failure {record.status}",
                                                 "type": "scripted", "code": str(record.status)}}
            if self.played >= len(self.responses):
                record.status = 410
                return 410, {"error": {"message": f"script exhausted after {self.played} responses",
                                       "type": "invalid_request_error"}}
            scripted = self.responses[self.played]
            self.played += 1
            return 200, self._completion(scripted, body, self.played)

    @staticmethod
    def _completion(scripted: dict[str, Any], body: dict[str, Any], number: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": scripted.get("content")}
        calls = [{"id": f"call_{number}_{i}", "type": "function",
                  "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                 for i, c in enumerate(scripted.get("tool_calls") or [])]
        if calls:
            message["tool_calls"] = calls
        usage = dict(scripted.get("usage") or {})
        usage.setdefault("prompt_tokens", estimate_tokens([body.get("messages"), body.get("tools")]))
        usage.setdefault("completion_tokens", estimate_tokens(message))
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {"id": f"chatcmpl-scripted-{number}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": usage}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload = server.answer(self.path, body, self.headers.get("Authorization"))
                self._send(status, payload)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # quiet: tests read the records
                log.debug("scripted server: " + format, *args)

        return Handler
