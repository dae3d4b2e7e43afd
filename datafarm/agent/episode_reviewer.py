"""The episode reviewer role: when the bindings configure an LLM agent, a (vision-language) model looks at
each episode the classical checks admitted and keeps or rejects it with a reason. Without a key the
classical checks (datafarm.review) decide alone.

It judges what the checks cannot: a generated video that moves the robot where the simulation did not,
invented or vanished objects, or motion that would teach a policy something wrong although the judge
accepted it. Each session runs in a folder of its own holding the episode's contact sheet (sim beside
render, per camera; read_file on a .png shows it to the model) and the checks' figures; it must write
``review/episodes/decision.json``: {"decision": "keep" | "reject", "reason": "..."}.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from datafarm.agent.bindings import Bindings
from datafarm.agent.runtime import open_session, require_submitted
from datafarm.costs import CostLedger

DECISIONS = ("keep", "reject")
DECISION_FILE = Path("review", "episodes", "decision.json")
DOCS = ("episodes/sheet.png is the episode's contact sheet: for each camera, a row of the simulator's frames "
        "and below it the same frames as rendered for the dataset, six moments from start to end. "
        "episodes/review.json holds the judge's verdict and the automated checks with their values and limits. "
        f"Write {DECISION_FILE.as_posix()}: "
        '{"decision": "keep" or "reject", "reason": "one line"}. Then call submit with that line.')


def decision_problem(path: Path) -> str | None:
    """Why `path` is not a usable decision, or None."""
    if not path.is_file():
        return f"write {DECISION_FILE.as_posix()} first"
    try:
        decision = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        return f"{DECISION_FILE.as_posix()} is not valid JSON ({error})"
    if not isinstance(decision, dict) or decision.get("decision") not in DECISIONS:
        return f'{DECISION_FILE.as_posix()} needs "decision": "keep" or "reject"'
    if not str(decision.get("reason", "")).strip():
        return f'{DECISION_FILE.as_posix()} needs a "reason"'
    return None


def review_episode_with_llm(bindings: Bindings, workdir: Path, request: str, sheet: Path, review: dict,
                            ledger: CostLedger | None = None) -> dict:
    """Run the episode_reviewer session on one episode; its decision, reason, model, cost and transcript."""
    workdir = Path(workdir)
    folder = workdir / "episodes"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(sheet, folder / "sheet.png")
    (folder / "review.json").write_text(json.dumps(review, indent=1, sort_keys=True, default=str))
    target = workdir / DECISION_FILE
    session = open_session("episode_reviewer", bindings, workdir, request, None, DOCS, ledger,
                           submit_check=lambda _: decision_problem(target))
    result = require_submitted("episode_reviewer", session.run())
    decision = json.loads(target.read_text())
    return {"decision": decision["decision"], "reason": str(decision["reason"]).strip(), "model": result.model,
            "usd": round(result.usd, 6), "transcript": str(result.transcript)}
