"""The contract reviewer role, run as DESIGN.md has it: a separate model reads the request, the contract
(success criteria = the hidden judge's check names, randomization, count, render prompts), the scene
and the inventory flags, and accepts or objects with reasons before any rollout.

It sees only `contract/` in its own folder (copies written here), never the expert or the judge's code.
Its submit summary's first line is the verdict, `accept` or `revise`; the lines after it are reasons.
The offline equivalent is the checklist in `datafarm.farm.authoring.review_contract`.
"""

from __future__ import annotations

import json
from pathlib import Path

from datafarm.agent.bindings import Bindings
from datafarm.agent.runtime import open_session, require_submitted
from datafarm.costs import CostLedger

VERDICTS = ("accept", "revise")


def _verdict_problem(summary: str) -> str | None:
    first = (summary.strip().splitlines() or [""])[0].strip().lower()
    return None if first in VERDICTS else f"the first line must be `accept` or `revise`, not {first!r}"


def review_contract_with_llm(bindings: Bindings, workdir: Path, request: str, contract: dict, render_contract: dict,
                             scene_yaml: str, ledger: CostLedger | None = None) -> dict:
    """Run the contract_reviewer session in `workdir`; its verdict, reasons, model, cost and transcript."""
    folder = Path(workdir) / "contract"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "contract.json").write_text(json.dumps(contract, indent=1, sort_keys=True))
    (folder / "render_contract.json").write_text(json.dumps(render_contract, indent=1, sort_keys=True))
    (folder / "scene.yaml").write_text(scene_yaml)
    docs = ("contract/ holds contract.json (its success_criteria are the hidden judge's check names; "
            "not_in_inventory lists scene objects the calibration footage does not show), render_contract.json and "
            "scene.yaml. Answer with submit(summary): first line `accept` or `revise`, then one line per problem.")
    session = open_session("contract_reviewer", bindings, Path(workdir), request, None, docs, ledger,
                           submit_check=_verdict_problem)
    result = require_submitted("contract_reviewer", session.run())
    verdict, _, reasons = result.summary.strip().partition("\n")
    return {"verdict": verdict.strip().lower(), "reasons": reasons.strip(), "model": result.model,
            "usd": round(result.usd, 6), "transcript": result.transcript, "context_sha256": result.context_sha256}
