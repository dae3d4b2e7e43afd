"""The LLM agent runtime: a role session is a tool-calling loop on litellm.completion.

A `Session` sends the role's compiled context, lets the model call its tools (tools.Toolbox) until it
calls submit(summary), and appends every message, request, response, retry and tool call to a JSONL
transcript as it goes. A killed session is resumed by constructing it again on the same transcript:
the recorded messages are replayed (unanswered tool calls are answered) and the loop continues, so
finished turns are not asked again. Every call's cost (litellm.completion_cost; self-hosted prices come
from the bindings) goes to the cost ledger, and a call that would take a phase past its USD cap is not
made: BudgetExceeded says what was spent and which bindings key raises the cap. 429s, 5xx, time-outs
and lost connections are retried with exponential backoff, a bounded number of times.

`LLMAuthor` is the Author (datafarm.author.base) made of role sessions; see its docstring.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from datafarm.errors import BudgetSpent, TransientError

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map at import

from datafarm.agent.bindings import Bindings, BindingsError  # noqa: E402
from datafarm.agent.roles import Role, compile_context, get_role  # noqa: E402
from datafarm.agent.tools import (  # noqa: E402
    ExpertRunner,
    SubmitCheck,
    Toolbox,
    check_defines,
    check_scene_files,
    judge_api_text,
    skill_api_text,
)
from datafarm.author.base import Author, RequestRefused, TaskMatch  # noqa: E402
from datafarm.costs import CostLedger  # noqa: E402
from datafarm.logs import NOTABLE  # noqa: E402
from datafarm.workspace.jsonl import append_jsonl, read_jsonl  # noqa: E402

log = logging.getLogger(__name__)

KICKOFF = "Begin. Work only through your tools, and finish by calling submit(summary)."
NUDGE = "Reply with tool calls only: continue the work, and call submit(summary) when it is done."
CHARS_PER_TOKEN = 4  # for estimating the next call's prompt before it is sent


class AgentError(TransientError, RuntimeError):
    """A role session could not finish (provider failure, bad transcript, too many turns)."""


class BudgetExceeded(BudgetSpent, AgentError):
    """The next call would take the phase's LLM spend past its USD cap."""

    def __init__(self, phase: str, spent: float, estimate: float, cap: float, hint: str):
        self.phase, self.spent, self.estimate, self.cap = phase, spent, estimate, cap
        super().__init__(f"phase {phase!r} has spent ${spent:.4f} on LLM calls; the next call (about "
                         f"${estimate:.4f}) would pass its cap of ${cap:.4f}. To continue, {hint}, then rerun "
                         "(the session resumes from its transcript).")


@dataclass
class SessionResult:
    role: str
    model: str
    phase: str
    status: str  # "submitted", "paused" (stop_after_turns) or "max_turns"
    summary: str | None
    turns: int
    prompt_tokens: int
    completion_tokens: int
    usd: float
    context_sha256: str
    transcript: str

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Transcript:
    """An append-only JSONL file of a session's events, written as they happen."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, event: str, **data: Any) -> None:
        append_jsonl(self.path, {"event": event, "time": round(time.time(), 3), **data})

    def events(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path)  # a line torn by a kill is left out; everything before it stands


def _retryable() -> tuple[type[BaseException], ...]:
    from litellm import exceptions as e

    return (e.RateLimitError, e.ServiceUnavailableError, e.APIConnectionError, e.Timeout,
            e.InternalServerError, e.BadGatewayError)


def phase_llm_spend(ledger: CostLedger, phase: str) -> float:
    """USD the ledger holds for LLM calls in `phase` (all sessions, this run and killed ones)."""
    return sum(e.usd for e in ledger.entries() if e.phase == phase and e.item.startswith("llm:"))


class Session:
    """One role's conversation with its model, bound to a workspace root and a transcript file."""

    def __init__(self, role: Role | str, bindings: Bindings, root: Path, context: str, context_sha256: str,
                 transcript: Path, ledger: CostLedger | None = None, phase: str | None = None,
                 expert_runner: ExpertRunner | None = None, submit_check: SubmitCheck | None = None,
                 completion: Callable[..., Any] | None = None, sleep: Callable[[float], None] = time.sleep):
        import litellm

        litellm.suppress_debug_info = True
        self.role = get_role(role) if isinstance(role, str) else role
        self.bindings = bindings
        self.model = bindings.model_for(self.role.name)
        self.phase = phase or self.role.phase
        self.context, self.context_sha256 = context, context_sha256
        self.transcript = Transcript(transcript)
        self.ledger = ledger
        self.toolbox = Toolbox(self.role, root, expert_runner, submit_check)
        self.completion = completion or litellm.completion
        self.sleep = sleep
        self.input_price = self._input_price()
        self.messages: list[dict[str, Any]] = []
        self.turns = self.prompt_tokens = self.completion_tokens = 0
        self.usd = self.last_call_usd = 0.0

    # ----- prices and budget ---------------------------------------------------------------------
    def _input_price(self) -> float:
        import litellm

        if self.model in self.bindings.prices:
            return self.bindings.prices[self.model].input_per_token
        try:
            return float(litellm.get_model_info(self.model).get("input_cost_per_token") or 0.0)
        except Exception:
            if self.bindings.cap_for(self.phase) is None:
                return 0.0
            raise BindingsError(f"model {self.model!r} has no price in litellm's price map, so the "
                                f"{self.phase!r} cap cannot be kept: add prices.{self.model} = {{input_per_token, "
                                f"output_per_token}} to the bindings (0 for a free self-hosted model)") from None

    def _check_budget(self) -> None:
        cap = self.bindings.cap_for(self.phase)
        if cap is None:
            return
        spent = phase_llm_spend(self.ledger, self.phase) if self.ledger else self.usd
        prompt_chars = sum(len(json.dumps(m)) for m in self.messages) + len(json.dumps(self.toolbox.schemas()))
        estimate = max(self.last_call_usd, prompt_chars / CHARS_PER_TOKEN * self.input_price)
        if spent + estimate > cap:
            self.transcript.append("budget_exceeded", phase=self.phase, spent=spent, estimate=estimate, cap=cap)
            raise BudgetExceeded(self.phase, spent, estimate, cap, self.bindings.cap_hint(self.phase))

    def _charge(self, response: Any) -> tuple[int, int, float]:
        import litellm

        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            usd = float(litellm.completion_cost(completion_response=response, model=self.model))
        except Exception as error:  # unpriced and uncapped: record the tokens, at no price
            log.warning("no cost for %s (%s); charged $0", self.model, error)
            usd = 0.0
        if self.ledger is not None:
            tokens = prompt + completion
            # CostEntry has no role field: the unit names it ("tokens:<role>").
            self.ledger.add(self.phase, f"llm:{self.model}", tokens, f"tokens:{self.role.name}",
                            usd / tokens if tokens else 0.0, usd=usd)
        return prompt, completion, usd

    # ----- provider calls ---------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        key = os.environ.get(self.bindings.api_key_env or "") if self.bindings.api_key_env else None
        return text.replace(key, "***") if key else text

    def _complete(self) -> Any:
        kwargs: dict[str, Any] = {"model": self.model, "messages": self.messages, "tools": self.toolbox.schemas(),
                                  "timeout": self.bindings.timeout_s, "max_retries": 0}
        if self.bindings.api_base:
            kwargs["api_base"] = self.bindings.api_base
        if self.bindings.temperature is not None:
            kwargs["temperature"] = self.bindings.temperature
        key = self.bindings.api_key()
        if key:
            kwargs["api_key"] = key
        retryable = _retryable()
        for attempt in range(self.bindings.max_retries + 1):
            self.transcript.append("request", turn=self.turns + 1, attempt=attempt + 1, model=self.model,
                                   messages=len(self.messages))
            try:
                return self.completion(**kwargs)
            except retryable as error:
                reason = self._redact(f"{type(error).__name__}: {error}")[:500]
                if attempt == self.bindings.max_retries:
                    self.transcript.append("gave_up", turn=self.turns + 1, error=reason)
                    raise AgentError(f"{self.role.name}: {self.model} failed {attempt + 1} times; "
                                     f"last: {reason}") from None
                delay = min(self.bindings.backoff_max_s, self.bindings.backoff_s * 2 ** attempt)
                self.transcript.append("retry", turn=self.turns + 1, attempt=attempt + 1, delay_s=delay, error=reason)
                log.warning("%s: %s; retrying in %.1f s", self.role.name, reason, delay)
                self.sleep(delay)
            except Exception as error:
                reason = self._redact(f"{type(error).__name__}: {error}")[:500]
                self.transcript.append("error", turn=self.turns + 1, error=reason)
                raise AgentError(f"{self.role.name}: {self.model} refused the call: {reason}") from None
        raise AssertionError("unreachable")

    # ----- conversation -------------------------------------------------------------------------------
    def _add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.transcript.append("message", message=message)

    def _answer(self, calls: list[dict[str, Any]]) -> str | None:
        """Run tool calls, add their results; the accepted submit summary, if one was accepted."""
        submitted = None
        for call in calls:
            name, arguments = call["function"]["name"], call["function"].get("arguments") or "{}"
            outcome = self.toolbox.call(name, arguments)
            self.transcript.append("tool", turn=self.turns, name=name, ok=outcome.ok, chars=len(outcome.content))
            self._add({"role": "tool", "tool_call_id": call["id"], "name": name, "content": outcome.content})
            if outcome.images:  # tool results carry text only: images follow as a user message
                self._add({"role": "user", "content": [{"type": "text", "text": f"Images from {name}:"}] + [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}
                    for png in outcome.images]})
            if outcome.submitted is not None and submitted is None:
                submitted = outcome.submitted
                self.transcript.append("submitted", summary=submitted)
        return submitted

    def _restore(self) -> tuple[str | None, dict[str, Any] | None]:
        """Replay the transcript: (an accepted summary, the end event) so far."""
        events = self.transcript.events()
        if not events:
            return None, None
        header = events[0]
        if header.get("event") != "session" or header.get("role") != self.role.name:
            raise AgentError(f"{self.transcript.path} is not a transcript of a {self.role.name} session")
        if header.get("context_sha256") != self.context_sha256:
            raise AgentError(f"{self.transcript.path} was recorded with another context "
                             f"({header.get('context_sha256', '')[:12]} != {self.context_sha256[:12]}); move it away "
                             "to start afresh")
        submitted, end = None, None
        for event in events:
            kind = event.get("event")
            if kind == "message":
                self.messages.append(event["message"])
            elif kind == "response":
                self.turns += 1
                self.prompt_tokens += event["usage"]["prompt_tokens"]
                self.completion_tokens += event["usage"]["completion_tokens"]
                self.usd += event["usd"]
                self.last_call_usd = event["usd"]
            elif kind == "submitted":
                submitted = event["summary"]
            elif kind == "end":
                end = event
        answered = {m.get("tool_call_id") for m in self.messages if m.get("role") == "tool"}
        last = next((m for m in reversed(self.messages) if m.get("role") == "assistant"), None)
        pending = [c for c in (last or {}).get("tool_calls") or [] if c["id"] not in answered]
        if pending and end is None:
            log.info("%s: answering %d tool calls left open by the killed session", self.role.name, len(pending))
            submitted = self._answer(pending) or submitted
        log.info("%s: resumed from %s at turn %d", self.role.name, self.transcript.path, self.turns)
        return submitted, end

    def run(self, stop_after_turns: int | None = None) -> SessionResult:
        """Run (or resume) until submit is accepted, the turn limit, or `stop_after_turns` new turns."""
        submitted, end = self._restore()
        if end is not None:
            return self._result(end["status"], end.get("summary"))
        if not self.messages:
            self.transcript.append("session", role=self.role.name, model=self.model, phase=self.phase,
                                   context_sha256=self.context_sha256, tools=list(self.role.tools),
                                   api_base=self.bindings.api_base)
            self._add({"role": "system", "content": self.context})
            self._add({"role": "user", "content": KICKOFF})
        new_turns = 0
        while submitted is None:
            if self.turns >= self.bindings.max_turns:
                return self._finish("max_turns", None)
            if stop_after_turns is not None and new_turns >= stop_after_turns:
                return self._result("paused", None)
            self._check_budget()
            started = time.perf_counter()
            response = self._complete()
            self.turns += 1
            new_turns += 1
            prompt, completion, usd = self._charge(response)
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.usd, self.last_call_usd = self.usd + usd, usd
            choice = response.choices[0]
            self.transcript.append("response", turn=self.turns, usd=usd, finish_reason=choice.finish_reason,
                                   usage={"prompt_tokens": prompt, "completion_tokens": completion},
                                   seconds=round(time.perf_counter() - started, 3))
            calls = [{"id": c.id, "type": "function",
                      "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"}}
                     for c in choice.message.tool_calls or []]
            message: dict[str, Any] = {"role": "assistant", "content": choice.message.content}
            if calls:
                message["tool_calls"] = calls
            self._add(message)
            if calls:
                submitted = self._answer(calls)
            else:
                self._add({"role": "user", "content": NUDGE})
        return self._finish("submitted", submitted)

    def _finish(self, status: str, summary: str | None) -> SessionResult:
        result = self._result(status, summary)
        self.transcript.append("end", **{k: v for k, v in asdict(result).items() if k != "transcript"})
        log.info("%s: %s after %d turns, %d tokens, $%.4f", self.role.name, status, self.turns, result.tokens, self.usd,
                 extra=NOTABLE)
        return result

    def _result(self, status: str, summary: str | None) -> SessionResult:
        return SessionResult(self.role.name, self.model, self.phase, status, summary, self.turns, self.prompt_tokens,
                             self.completion_tokens, self.usd, self.context_sha256, str(self.transcript.path))


def open_session(role: Role | str, bindings: Bindings, root: Path, request: str, survey: dict | None = None,
                 api_docs: str = "", ledger: CostLedger | None = None, **options: Any) -> Session:
    """compile_context + Session, with the transcript at <root>/transcripts/<role>-<context hash>.jsonl
    (outside every role's folders), so the same context resumes the same transcript."""
    role = get_role(role) if isinstance(role, str) else role
    text, digest = compile_context(role, request, survey, api_docs)
    transcript = Path(root) / "transcripts" / f"{role.name}-{digest[:12]}.jsonl"
    return Session(role, bindings, root, text, digest, transcript, ledger, **options)


def require_submitted(role: str, result: SessionResult) -> SessionResult:
    """`result` if the session submitted, else an AgentError naming how it ended and its transcript."""
    if result.status != "submitted":
        raise AgentError(f"{role} did not submit ({result.status} after {result.turns} turns); "
                         f"transcript: {result.transcript}")
    return result


class LLMAuthor(Author):
    """The Author made of LLM role sessions (bindings choose the models; see datafarm.author.base).

    match(): the contract_author names the task (a built-in name, or a new snake_case one) in the first
    line of its submit summary. write_package(): in <workdir>, the scene_builder writes scene/ (task.yaml,
    scene.yaml, params.yaml); the judge_author writes judge/judge.py seeing scene/ but not expert/; the
    expert_author writes expert/expert.py seeing scene/ but not judge/, and may call run_expert (the
    `expert_runner` callback) for statistics. The five files are then copied to `destination`.
    """

    name = "llm"
    revises_scenes = True

    def __init__(self, bindings: Bindings, workdir: Path, ledger: CostLedger | None = None,
                 survey: dict | None = None, expert_runner: ExpertRunner | None = None, **session_options: Any):
        self.bindings, self.workdir, self.ledger = bindings, Path(workdir), ledger
        self.survey, self.expert_runner, self.session_options = survey, expert_runner, session_options
        self.results: dict[str, SessionResult] = {}  # role -> its last session's result
        self.scene_feedback = ""  # set by the build when grounding fails: the scene builder revises with it
        self._requests: dict[str, str] = {}

    def _run(self, role: str, request: str, api_docs: str, **options: Any) -> SessionResult:
        session = open_session(role, self.bindings, self.workdir, request, self.survey, api_docs, self.ledger,
                               **self.session_options, **options)
        result = session.run()
        self.results[role] = result
        return require_submitted(role, result)

    def match(self, request: str) -> TaskMatch:
        from datafarm.library import BUILTIN_TASKS

        known = "\n".join(f"- {name}: {text}" for name, text in BUILTIN_TASKS.items())
        docs = (f"Reference tasks the farm already knows:\n{known}\n\nAnswer with submit(summary): first line "
                "the task name (a reference name if the request is one of them, else a new snake_case name), "
                "then one line on why. If the rig cannot do the request, first line `refuse`, then why.")

        def named(summary: str) -> str | None:
            first = summary.strip().splitlines()[0].strip()
            ok = re.fullmatch(r"[a-z][a-z0-9_]*", first)
            return None if ok else f"first line {first!r} is not a snake_case task name"

        result = self._run("contract_author", request, docs, phase="build", submit_check=named)
        task, _, reason = result.summary.strip().partition("\n")
        if task == "refuse":
            raise RequestRefused(f"the LLM author refuses the request: {reason.strip()}")
        self._requests[task] = request
        return TaskMatch(task, 1.0 if task in BUILTIN_TASKS else 0.5, reason.strip() or f"named by {result.model}")

    def write_package(self, match: TaskMatch, destination: Path) -> Path:
        from datafarm.scene.spec import SceneSpec, load_scene_spec, mesh_files
        from datafarm.task.package import PACKAGE_FILES, TaskInfo

        request = self._requests.get(match.task, match.reason)
        schemas = (f"task.yaml schema: {json.dumps(TaskInfo.model_json_schema())}\n\n"
                   f"scene.yaml schema: {json.dumps(SceneSpec.model_json_schema())}")
        root = self.workdir
        feedback = f"\n\nGrounding feedback on your last scene:\n{self.scene_feedback}" if self.scene_feedback else ""
        self._run("scene_builder", request, f"Task name: {match.task}\n\n{schemas}{feedback}",
                  submit_check=lambda _: check_scene_files(root / "scene"))
        self._run("judge_author", request, judge_api_text(),
                  submit_check=lambda _: check_defines(root / "judge" / "judge.py", "judge"))
        self._run("expert_author", request, skill_api_text(), expert_runner=self.expert_runner,
                  submit_check=lambda _: check_defines(root / "expert" / "expert.py", "solve"))
        destination = Path(destination)
        if destination.exists():
            shutil.rmtree(destination)
        destination.mkdir(parents=True)
        sources = {"expert.py": root / "expert", "judge.py": root / "judge"}
        for name in PACKAGE_FILES:
            shutil.copy(sources.get(name, root / "scene") / name, destination / name)
        for name in mesh_files(load_scene_spec(root / "scene" / "scene.yaml")):
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / "scene" / name, destination / name)
        return destination
